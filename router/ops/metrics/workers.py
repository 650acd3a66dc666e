"""The families the workers and the pool own, read when Prometheus scrapes.

``refresh`` asks every serving worker for its status (as ``/admin/status`` does) and keeps the
answers; ``collect`` turns them, and the pool's own state, into metric families. Counters that
live in a worker (prefix-cache tokens, evictions) restart from 0 with a new worker, which
Prometheus's ``rate()`` treats as a counter reset.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from engines.errors import WorkerDiedError, WorkerNotReadyError
from engines.protocol import WorkerStatus
from router.handle import ModelState
from router.pool import ModelPool

logger = logging.getLogger(__name__)

STATUS_TIMEOUT_S = 2.0  # a busy worker answers between two steps; a scrape should not wait longer


class PoolCollector:
    """A prometheus-client collector over the pool and the workers' last answers."""

    def __init__(self, pool: ModelPool) -> None:
        self._pool = pool
        self._statuses: dict[str, WorkerStatus] = {}

    async def refresh(self) -> None:
        handles = [h for h in self._pool.handles.values() if h.serving]
        replies = await asyncio.gather(*(h.worker.status(STATUS_TIMEOUT_S) for h in handles), return_exceptions=True)
        statuses = {}
        for handle, reply in zip(handles, replies):
            if isinstance(reply, WorkerStatus):
                statuses[handle.model_id] = reply
            elif not isinstance(reply, (TimeoutError, WorkerNotReadyError, WorkerDiedError)):
                logger.warning("model %s: status for /metrics failed: %r", handle.model_id, reply)
        self._statuses = statuses

    def describe(self) -> list[Metric]:
        return []  # families vary with the config; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        pool, labels = self._pool, ["model_name"]
        running = GaugeMetricFamily("rapidmlx_num_requests_running", "Sequences in the worker's batch.", labels=labels)
        waiting = GaugeMetricFamily("rapidmlx_num_requests_waiting", "Requests in the worker not in the batch yet.", labels=labels)
        kv = GaugeMetricFamily("rapidmlx_kv_cache_bytes", "KV cache memory of the sequences in the batch.", labels=labels)
        queries = CounterMetricFamily("rapidmlx_prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", labels=labels)
        hits = CounterMetricFamily("rapidmlx_prefix_cache_hits", "Prompt tokens the prefix cache served.", labels=labels)
        memory = GaugeMetricFamily("rapidmlx_prefix_cache_memory_bytes", "Prefix-cache entries in memory.", labels=labels)
        disk = GaugeMetricFamily("rapidmlx_prefix_cache_disk_bytes", "Prefix-cache entries on disk.", labels=labels)
        evictions = CounterMetricFamily("rapidmlx_prefix_cache_evictions", "Prefix-cache entries evicted from memory.", labels=labels)
        for model_id, status in self._statuses.items():
            running.add_metric([model_id], status.running)
            waiting.add_metric([model_id], status.waiting)
            kv.add_metric([model_id], status.kv_bytes)
            cache = status.prefix_cache
            if cache is not None:
                queries.add_metric([model_id], cache.lookup_tokens)
                hits.add_metric([model_id], cache.hit_tokens)
                memory.add_metric([model_id], cache.bytes)
                evictions.add_metric([model_id], cache.evictions)
            if status.prefix_disk is not None:
                disk.add_metric([model_id], status.prefix_disk.bytes)
        yield from (running, waiting, kv, queries, hits, memory, disk, evictions)

        state = GaugeMetricFamily("rapidmlx_model_state", "1 for the state each configured model is in.", labels=["model_name", "state"])
        resident = GaugeMetricFamily("rapidmlx_model_resident_bytes", "The memory estimate of each model with a worker.", labels=labels)
        restarts = CounterMetricFamily("rapidmlx_worker_restarts", "Worker restarts after a crash.", labels=labels)
        inflight = GaugeMetricFamily("rapidmlx_model_inflight", "Generations holding a place (running or queued) in the router.",
                                     labels=labels)
        capacity = GaugeMetricFamily("rapidmlx_model_capacity", "max_concurrency + max_queue: places before 429.", labels=labels)
        count = 0
        for model_id, handle in pool.handles.items():
            inflight.add_metric([model_id], handle.inflight + sum(h.inflight for h in pool.draining(model_id)))
            capacity.add_metric([model_id], handle.config.max_concurrency + handle.config.max_queue)
            for value in ModelState:
                state.add_metric([model_id, value.value], 1.0 if handle.state is value else 0.0)
            if handle.worker is not None and handle.memory is not None:
                resident.add_metric([model_id], handle.memory.total_bytes)
                count += 1
            restarts.add_metric([model_id], pool.restarts(model_id))
        models = GaugeMetricFamily("rapidmlx_models_resident", "Models with a worker (loading, serving or draining).")
        models.add_metric([], count)
        yield from (state, resident, restarts, inflight, capacity, models)
