"""``GET /admin/status``: each model's worker, load and prefix cache, asked of the workers now.

The counters are the workers' own (engines.protocol.WorkerStatus); the metrics issue exports
the same numbers to Prometheus. Keys and admin-only access come with that issue too: until
then this route is as open as the inference routes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Controller

from engines.client import WorkerState
from engines.errors import WorkerDiedError, WorkerNotReadyError
from router.http.methods import get_or_head
from router.pool import ModelHandle, ModelPool

STATUS_TIMEOUT_S = 5.0


async def model_status(handle: ModelHandle) -> dict[str, Any]:
    worker = handle.worker
    status: dict[str, Any] = {
        "state": handle.state, "pid": worker.pid if worker else None, "restarts": worker.restarts if worker else 0,
        "last_error": (worker.last_error if worker else None) or handle.load_error,
    }
    if worker is None or worker.state is not WorkerState.READY:
        return status
    try:
        reply = await worker.status(STATUS_TIMEOUT_S)
    except (TimeoutError, WorkerNotReadyError, WorkerDiedError) as exc:
        return {**status, "status_error": f"{type(exc).__name__}: {exc}"}
    status.update(running=reply.running, waiting=reply.waiting, prefix_cache=None,
                  kv_cache={"bits": reply.kv_bits, "bytes": reply.kv_bytes, "quantized_bytes": reply.kv_quantized_bytes})
    cache = reply.prefix_cache
    if cache is not None:
        status["prefix_cache"] = {
            "entries": cache.entries, "bytes": cache.bytes, "budget_bytes": cache.budget_bytes,
            "lookups": cache.lookups, "hits": cache.hits, "lookup_tokens": cache.lookup_tokens, "hit_tokens": cache.hit_tokens,
            "hit_ratio": cache.hit_tokens / cache.lookup_tokens if cache.lookup_tokens else None,
            "stored": cache.stored, "evictions": cache.evictions, "shared_prefill_tokens": cache.shared_prefill_tokens,
            "disk": None,
        }
        disk = reply.prefix_disk
        if disk is not None:
            status["prefix_cache"]["disk"] = {
                "entries": disk.entries, "bytes": disk.bytes, "budget_bytes": disk.budget_bytes, "hits": disk.hits,
                "hit_tokens": disk.hit_tokens, "bytes_written": disk.bytes_written, "bytes_read": disk.bytes_read,
                "queue_depth": disk.queue_depth, "dropped_writes": disk.dropped_writes, "failed_writes": disk.failed_writes,
                "removed_unreadable": disk.removed_unreadable, "restore_seconds": disk.restore_seconds,
                "flush_seconds": disk.flush_seconds,
            }
    return status


class StatusController(Controller):
    path = "/admin"

    @get_or_head("/status")
    async def status(self, pool: ModelPool) -> dict[str, Any]:
        ids = list(pool.handles)
        statuses = await asyncio.gather(*(model_status(pool.handles[i]) for i in ids))
        return {"models": dict(zip(ids, statuses))}
