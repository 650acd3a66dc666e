"""What one finished generation adds to the request families: tokens, finish reason, latencies.

Timings come from two clocks: the router's (arrival of the HTTP request, each delta's arrival)
for TTFT, inter-token and end-to-end latency, and the worker's (sent with the first delta) for
queue and prefill time, which the router cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from router.ops.metrics.families import Metrics


@dataclass
class GenerationTimes:
    """Filled in by ``router.turn.textgen.Generation`` as deltas arrive (perf_counter seconds)."""

    arrived: float
    first_token: float | None = None
    last_token: float | None = None
    gaps: list[tuple[float, int]] = field(default_factory=list)  # (seconds since the previous delta, tokens in it)
    queued_s: float | None = None
    prefill_s: float | None = None

    def tokens_arrived(self, now: float, count: int) -> None:
        if self.first_token is None:
            self.first_token = now
        elif self.last_token is not None:
            self.gaps.append((now - self.last_token, count))
        self.last_token = now


def observe_generation(metrics: Metrics, model_id: str, key_name: str | None, times: GenerationTimes, *,
                       prompt_tokens: int, cached_tokens: int, completion_tokens: int, finish_reason: str) -> None:
    metrics.prompt_tokens.labels(model_id).inc(prompt_tokens)
    metrics.cached_prompt_tokens.labels(model_id).inc(cached_tokens)
    metrics.generation_tokens.labels(model_id).inc(completion_tokens)
    metrics.request_success.labels(model_id, finish_reason).inc()
    metrics.recent.observe(model_id, None if times.first_token is None else times.first_token - times.arrived, completion_tokens)
    if times.first_token is not None:
        metrics.ttft.labels(model_id).observe(times.first_token - times.arrived)
        metrics.decode_time.labels(model_id).observe(times.last_token - times.first_token)
        metrics.e2e.labels(model_id).observe(times.last_token - times.arrived)
    inter_token = metrics.inter_token.labels(model_id)
    for gap, count in times.gaps:
        for _ in range(count):  # a delta that brought several tokens spreads its wait over them
            inter_token.observe(gap / count)
    if times.queued_s is not None:
        metrics.queue_time.labels(model_id).observe(times.queued_s)
    if times.prefill_s is not None:
        metrics.prefill_time.labels(model_id).observe(times.prefill_s)
    if key_name is not None:
        metrics.key_tokens.labels(key_name, "prompt").inc(prompt_tokens)
        metrics.key_tokens.labels(key_name, "generation").inc(completion_tokens)
