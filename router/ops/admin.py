"""``/admin``: what each model is doing, the config's last reload, and the operator's actions.

``GET /admin/status``, ``POST /admin/reload``, ``POST /admin/models/{id}/load`` and ``/unload``.
The workers' counters (engines.protocol.WorkerStatus) are asked for now; the metrics issue
exports the same numbers to Prometheus. With `[[keys]]` these routes need an admin key; without
keys they answer only to clients on loopback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from typing import Any

from litestar import Controller, Response, post
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.handlers.base import BaseRouteHandler
from litestar.params import FromPath

from engines.client import WorkerState
from engines.errors import WorkerDiedError, WorkerNotReadyError
from router.errors import RouterError
from router.handle import ModelHandle
from router.http.methods import get_or_head
from router.ops.auth.guard import Access
from router.ops.metrics.families import Metrics
from router.ops.reload.reloader import Reloader
from router.pool import ModelPool
from router.upstream.registry import Upstreams

STATUS_TIMEOUT_S = 5.0


class AdminOnlyError(RouterError):
    status, type, code = 403, "permission_error", "admin_only"


def loopback_only(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Without keys, admin routes answer only to this machine (with keys, an admin key: router/ops/auth)."""
    if connection.app.state.access.keys.enabled:
        return
    host = connection.client.host if connection.client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        local = False
    else:
        # A dual-stack listener sees an IPv4 client as ::ffff:127.0.0.1.
        local = (address.ipv4_mapped or address).is_loopback if address.version == 6 else address.is_loopback
    if not local:
        raise AdminOnlyError("Admin routes answer only on loopback while no keys are configured.")


async def model_status(pool: ModelPool, handle: ModelHandle) -> dict[str, Any]:
    """One model as an operator sees it: state, worker, memory, load, prefix cache, pending changes."""
    status = await worker_status(handle)
    pending = pool.replacement_of(handle.model_id)
    status.update(
        aliases=list(handle.config.aliases), pin=handle.config.pin, ttl_s=handle.config.ttl,
        tool_parser=handle.tool_parser, reasoning_parser=handle.reasoning_parser,
        inflight=handle.inflight, idle_s=round(time.monotonic() - handle.last_used, 1),
        replacement=None if pending is None else {"state": pending.state.value, "pid": pending.worker.pid if pending.worker else None,
                                                  "last_error": pending.last_error},
        draining=[{"pid": h.worker.pid, "inflight": h.inflight} for h in pool.draining(handle.model_id) if h.worker],
    )
    return status


async def worker_status(handle: ModelHandle) -> dict[str, Any]:
    worker = handle.worker
    status: dict[str, Any] = {
        "state": handle.state.value, "pid": worker.pid if worker else None, "restarts": worker.restarts if worker else 0,
        "last_error": handle.last_error, "memory": handle.memory.as_dict() if handle.memory and worker else None,
    }
    if worker is None or worker.state is not WorkerState.READY:
        return status
    try:
        reply = await worker.status(STATUS_TIMEOUT_S)
    except (TimeoutError, WorkerNotReadyError, WorkerDiedError) as exc:
        return {**status, "status_error": f"{type(exc).__name__}: {exc}"}
    status.update(running=reply.running, waiting=reply.waiting, prefix_cache=None,
                  kv_cache={"bits": reply.kv_bits, "window": handle.config.kv_cache.window, "bytes": reply.kv_bytes,
                            "quantized_bytes": reply.kv_quantized_bytes})
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


async def fleet_status(pool: ModelPool, reloader: Reloader, upstreams: Upstreams, access: Access,
                       metrics: Metrics) -> dict[str, Any]:
    """``GET /admin/status``, also what the status page renders (router/ops/ui): the config and its
    last reload, every model (with its last minutes of traffic), the upstreams, and requests per key."""
    handles = list(pool.handles.values())
    statuses = await asyncio.gather(*(model_status(pool, h) for h in handles))
    for handle, status in zip(handles, statuses):
        status["recent"] = metrics.recent.summary(handle.model_id)
    last = reloader.last
    return {
        "config": {"path": str(reloader.path) if reloader.path else None, "version": reloader.version, "hash": reloader.hash,
                   "last_reload": last.as_dict() if last else None},
        "memory_budget_bytes": int(pool.config.server.memory_budget_gb * 2**30),
        "models": {h.model_id: s for h, s in zip(handles, statuses)},
        "upstreams": {model_id: upstream.status() for model_id, upstream in upstreams.by_id.items()},
        "keys": {name: access.limits.usage(name) for name in access.keys.names},
    }


class AdminController(Controller):
    path = "/admin"
    guards = [loopback_only]
    opt = {"admin": True}

    @get_or_head("/status")
    async def status(self, pool: NamedDependency[ModelPool], reloader: NamedDependency[Reloader],
                     upstreams: NamedDependency[Upstreams], access: NamedDependency[Access],
                     metrics: NamedDependency[Metrics]) -> dict[str, Any]:
        return await fleet_status(pool, reloader, upstreams, access, metrics)

    @post("/reload", status_code=200)
    async def reload(self, reloader: NamedDependency[Reloader]) -> Response[dict[str, Any]]:
        """Reload the config file now; 400 with the errors (the last good config keeps serving)."""
        result = reloader.reload("api")
        if result.ok:
            return Response(result.as_dict(), status_code=200)
        message = "The config was not reloaded; the last good config keeps serving:\n" + "\n".join(result.errors)
        error = {"message": message, "type": "invalid_request_error", "code": "invalid_config", "param": None}
        return Response({**result.as_dict(), "error": error}, status_code=400)

    @post("/models/{model_id:str}/load", status_code=200)
    async def load(self, pool: NamedDependency[ModelPool], model_id: FromPath[str]) -> dict[str, Any]:
        handle = await pool.load(model_id)
        return {"model": model_id, **await model_status(pool, handle)}

    @post("/models/{model_id:str}/unload", status_code=200)
    async def unload(self, pool: NamedDependency[ModelPool], model_id: FromPath[str]) -> dict[str, Any]:
        handle = await pool.unload(model_id)
        return {"model": model_id, **await model_status(pool, handle)}
