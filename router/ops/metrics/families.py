"""Every metric family `/metrics` exports, on a registry of its own (one per app).

Names mirror vLLM's where a family exists there (``vllm:time_to_first_token_seconds`` →
``rapidmlx_time_to_first_token_seconds``), so dashboards and alerts carry over; every
per-model series is labelled ``model_name`` with the configured id. The families the workers
own (requests running and waiting, prefix cache, KV) are read from them at scrape time
(router/ops/metrics/workers.py); the rest is counted here as requests, loads and reloads happen.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from router.ops.metrics.recent import RecentRequests

# No `_created` series: they double the output, and neither dashboards nor alerts read them.
disable_created_metrics()

# Seconds: sub-second steps for latencies agents feel, up to a long agent turn.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
TOKEN_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
LOAD_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

MODEL = ("model_name",)


class Metrics:
    """The families, created on ``registry`` (a fresh one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.recent = RecentRequests()  # not exported: the status page's last minutes (router/ops/ui)
        r = self.registry
        # ---- requests, per model (vLLM's families)
        self.prompt_tokens = Counter("rapidmlx_prompt_tokens", "Prompt tokens of finished requests.", MODEL, registry=r)
        self.cached_prompt_tokens = Counter("rapidmlx_prompt_tokens_cached", "Prompt tokens served from the prefix cache.",
                                            MODEL, registry=r)
        self.generation_tokens = Counter("rapidmlx_generation_tokens", "Generated tokens.", MODEL, registry=r)
        self.request_success = Counter("rapidmlx_request_success", "Finished requests by finish reason.",
                                       (*MODEL, "finished_reason"), registry=r)
        self.ttft = Histogram("rapidmlx_time_to_first_token_seconds", "From the request's arrival to its first token.",
                              MODEL, buckets=LATENCY_BUCKETS, registry=r)
        self.inter_token = Histogram("rapidmlx_inter_token_latency_seconds", "Between two output tokens of a request.",
                                     MODEL, buckets=TOKEN_LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("rapidmlx_e2e_request_latency_seconds", "From the request's arrival to its last token.",
                             MODEL, buckets=LATENCY_BUCKETS, registry=r)
        self.queue_time = Histogram("rapidmlx_request_queue_time_seconds", "In the worker, before joining the batch.",
                                    MODEL, buckets=LATENCY_BUCKETS, registry=r)
        self.prefill_time = Histogram("rapidmlx_request_prefill_time_seconds", "From joining the batch to the first token.",
                                      MODEL, buckets=LATENCY_BUCKETS, registry=r)
        self.decode_time = Histogram("rapidmlx_request_decode_time_seconds", "From the first token to the last.",
                                     MODEL, buckets=LATENCY_BUCKETS, registry=r)
        # ---- the router
        self.model_loads = Counter("rapidmlx_model_loads", "Worker starts by result (ready, failed).", (*MODEL, "result"), registry=r)
        self.model_unloads = Counter("rapidmlx_model_unloads", "Workers stopped, by reason (ttl, budget, operator, reload, removed).",
                                     (*MODEL, "reason"), registry=r)
        self.model_evictions = Counter("rapidmlx_model_evictions", "Idle models unloaded to fit the memory budget.", MODEL, registry=r)
        self.load_seconds = Histogram("rapidmlx_model_load_seconds", "From starting a worker to its ready.", MODEL,
                                      buckets=LOAD_BUCKETS, registry=r)
        self.config_reloads = Counter("rapidmlx_config_reloads", "Config reloads by result (success, failure).", ("result",), registry=r)
        self.config_last_success = Gauge("rapidmlx_config_last_reload_success_timestamp_seconds",
                                         "Unix time the config last applied: the start, or the last reload that applied.", registry=r)
        self.config_last_reload_ok = Gauge("rapidmlx_config_last_reload_successful", "1 if the last reload applied, else 0.", registry=r)
        self.http_requests = Counter("rapidmlx_http_requests", "HTTP responses by API and status.", ("api", "status"), registry=r)
        self.auth_failures = Counter("rapidmlx_auth_failures", "Requests refused for a missing or unknown key (401).", registry=r)
        self.rejections = Counter("rapidmlx_rejections", "Requests refused before generating, by reason.", ("reason",), registry=r)
        self.key_requests = Counter("rapidmlx_key_requests", "Requests per key.", ("key_name",), registry=r)
        self.key_tokens = Counter("rapidmlx_key_tokens", "Tokens per key, prompt and generation.", ("key_name", "kind"), registry=r)
        # ---- upstreams and spillover (router/upstream/); model_name is the upstream model's id
        self.upstream_requests = Counter("rapidmlx_upstream_requests", "Requests proxied upstream, by the upstream's status (or unreachable).",
                                         (*MODEL, "status"), registry=r)
        self.upstream_errors = Counter("rapidmlx_upstream_errors", "Upstream failures by kind (unreachable, timeout, stream, status_5xx, check).",
                                       (*MODEL, "kind"), registry=r)
        self.upstream_latency = Histogram("rapidmlx_upstream_response_latency_seconds", "From sending a request upstream to its response headers.",
                                          MODEL, buckets=TOKEN_LATENCY_BUCKETS, registry=r)
        self.upstream_running = Gauge("rapidmlx_upstream_requests_running", "Requests in flight on an upstream.", MODEL, registry=r)
        self.upstream_healthy = Gauge("rapidmlx_upstream_healthy", "1 unless the upstream's last check or request could not reach it.",
                                      MODEL, registry=r)
        self.spillover = Counter("rapidmlx_spillover_requests", "Requests for a local model served by a spillover upstream, by reason.",
                                 (*MODEL, "upstream", "reason"), registry=r)
        self.config_last_success.set_to_current_time()  # the config the server starts with applies now
        self.config_last_reload_ok.set(1)
