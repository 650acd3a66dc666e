"""The model registry and every model's lifecycle: load, unload, the memory budget, reloads.

Names resolve by exact id, then exact alias, then glob alias in file order. A model loads at
start (``preload``) or on its first request; concurrent first requests load it once. Under
``[server] memory_budget_gb`` a model that does not fit unloads idle unpinned models, least
recently used first (router/ops/memory.py decides which). ``ttl`` unloads a model left idle.

A reload hands ``apply`` the new config and the per-model diff (router/ops/reload/diff.py):
router-only changes are applied to the live handle; an engine change starts a new worker and
switches routing to it once it is ready, while requests on the old one finish (bounded by
``[server] drain_timeout_s``); a removed model drains, then stops. Counting requests against a
model's limits is ``router/admission.py``'s job.

Worker sockets live in the private runtime dir under names unique to this router instance,
and every worker gets a secret token it must show when it connects.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import anyio

from engines.client import WorkerHandle, WorkerState
from engines.cpu_blas import choose_cpu_blas, log_choice
from engines.errors import WorkerLoadError, WorkerNotReadyError
from engines.protocol import ShardSpec, WorkerSpec
from router.errors import ModelNotFoundError, ModelUnavailableError
from router.handle import ModelHandle, ModelState
from router.model_files import ModelFilesError, read_max_context, read_vocab_size, resolve_model_path
from router.ops.config import ModelConfig, RouterConfig
from router.ops.metrics.families import Metrics
from router.ops.memory import GB, MemoryEstimate, Resident, estimate_memory, no_room_message, plan_eviction
from router.ops.reload.diff import ENGINE_FIELDS, RESTART_FIELDS, ModelChange
from router.ops.runtime_dir import prepare_runtime_dir
from router.turn.parser_choice import ParserChoice, ParserConfigError, choose_parsers

__all__ = ["LOAD_WAIT_S", "ModelHandle", "ModelPool", "ModelState"]

logger = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10.0  # for a worker to exit after Shutdown, beyond its prefix cache's flush

# How long a request waits for a model that is starting (lazy load or first start)
# before it gets 503 + Retry-After; a crashed worker's backoff window answers 503 at once.
LOAD_WAIT_S = 120.0
TTL_CHECK_S = 1.0  # how often idle models are checked against their ttl


class ModelPool:
    """Owns every ModelHandle; created in the app's lifespan."""

    def __init__(self, config: RouterConfig, runtime_dir: Path, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self._past_restarts: dict[str, int] = {}  # model id → restarts of its workers that are gone
        self._runtime_dir = runtime_dir
        # Socket names carry it, so two routers sharing a runtime dir never meet.
        self._instance = secrets.token_hex(4)
        self._blas = choose_cpu_blas(config.server.cpu_blas)
        log_choice(self._blas)
        self.handles = {model_id: self._new_handle(model_id, model_config) for model_id, model_config in config.local_models.items()}
        self._retiring: set[ModelHandle] = set()  # removed or replaced, draining towards their stop
        self._replacing: dict[str, tuple[ModelHandle, asyncio.Task]] = {}  # model id → its next worker, loading
        self._budget_lock = asyncio.Lock()  # one budget decision at a time, held until the worker exists
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the preloaded models' workers (in the background: HTTP serves meanwhile)."""
        prepare_runtime_dir(self._runtime_dir)
        for handle in self.handles.values():
            if handle.config.preload:
                self._spawn(self._load_logged(handle), f"preload[{handle.model_id}]")
        self._spawn(self._unload_expired(), "ttl")

    async def stop(self) -> None:
        """Stop every worker; each writes its prefix cache's queue to disk before it exits."""
        # Taken first: a cancelled drain forgets its handle's worker, which must still be stopped.
        workers = {h.worker for h in self._every_handle() if h.worker is not None}
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self._stop_worker(worker) for worker in workers))

    def is_ready(self) -> bool:
        """True when every preloaded model is serving (the /ready contract)."""
        return all(h.serving for h in self.handles.values() if h.config.preload)

    # ------------------------------------------------------------------ routing

    def resolve(self, name: str) -> ModelHandle:
        """Find the model a client named, by id, exact alias, then glob alias."""
        if name in self.handles:
            return self.handles[name]
        for handle in self.handles.values():
            if name in handle.config.aliases:
                return handle
        for handle in self.handles.values():
            if any(_is_glob(alias) and fnmatch.fnmatchcase(name, alias) for alias in handle.config.aliases):
                return handle
        raise ModelNotFoundError(name)

    async def ensure_started(self, handle: ModelHandle) -> None:
        """Load the model's files and tokenizer and start its worker, unless it has one.

        Returns without starting anything for a retired handle: the caller resolves the name again.

        Raises:
            ModelUnavailableError: the model failed, is unloading, is restarting after a crash,
                or does not fit the memory budget (503 with Retry-After).
        """
        _raise_if_unavailable(handle)
        if handle.worker is not None or handle.retired:
            return
        async with handle._load_lock:
            if handle.worker is None and not handle.retired:
                await self._prepare(handle)

    async def ensure_ready(self, handle: ModelHandle, timeout_s: float | None = LOAD_WAIT_S) -> None:
        """Start the model if needed and wait until it serves, within ``timeout_s``.

        Returns early for a handle a reload retired meanwhile: the caller resolves the name again.
        """
        await self.ensure_started(handle)
        if handle.retired and not handle.serving:
            return
        try:
            ready = await handle.wait_ready(timeout_s)
        except ModelUnavailableError:
            if handle.retired:
                return
            raise
        if not ready:
            raise ModelUnavailableError(f"Model {handle.model_id!r} is still loading.", retry_after_s=10.0)

    # ------------------------------------------------------------------ operator actions

    async def load(self, model_id: str) -> ModelHandle:
        """Load a model now (``POST /admin/models/{id}/load``), retrying one that failed."""
        handle = self._configured(model_id)
        self.clear_failure(handle)
        await self.ensure_ready(handle)
        return handle

    async def unload(self, model_id: str) -> ModelHandle:
        """Drain and stop a model's worker (``POST /admin/models/{id}/unload``); it loads again on demand."""
        handle = self._configured(model_id)
        await self._unload(handle, "unloaded by an operator", cause="operator")
        return handle

    def clear_failure(self, handle: ModelHandle) -> None:
        """Forget why the model failed, so its next load tries again."""
        handle.load_error = handle.replacement_error = None
        if handle.worker is not None and handle.worker.gave_up:
            self._forget_worker(handle)  # its process is gone and its supervisor has stopped

    # ------------------------------------------------------------------ reload

    def running_configs(self) -> dict[str, ModelConfig]:
        """Each model's config as it is being applied: a replacement in progress counts as applied."""
        return {model_id: (self._replacing[model_id][0] if model_id in self._replacing else handle).config
                for model_id, handle in self.handles.items()}

    def replacement_of(self, model_id: str) -> ModelHandle | None:
        """The worker a reload is starting for ``model_id``, until it takes over."""
        pending = self._replacing.get(model_id)
        return pending[0] if pending else None

    def draining(self, model_id: str) -> list[ModelHandle]:
        """Workers of ``model_id`` that no longer take requests and stop once theirs end."""
        return [h for h in self._retiring if h.model_id == model_id and h.worker is not None]

    def apply(self, config: RouterConfig, changes: list[ModelChange]) -> None:
        """Make the pool follow ``config``; ``changes`` is its diff against ``running_configs()``.

        Returns once routing follows the new file; replacements load, and old workers drain, in
        the background. Failed models whose config did not change are retried too.
        """
        old_server = self.config.server
        # Settings bound at start (the socket, the app's limits) keep running as they are.
        server = config.server.model_copy(update={name: getattr(old_server, name) for name in RESTART_FIELDS})
        self.config = config.model_copy(update={"server": server})
        if server.log_level != old_server.log_level:
            logging.getLogger().setLevel(server.log_level.upper())
        if server.cpu_blas != old_server.cpu_blas:  # for workers started from now on
            self._blas = choose_cpu_blas(server.cpu_blas)
            log_choice(self._blas)
        by_id = {change.model_id: change for change in changes}
        handles: dict[str, ModelHandle] = {}
        local_models = config.local_models  # upstream models are router/upstream/'s
        for model_id, model_config in local_models.items():
            handle, change = self.handles.get(model_id), by_id.get(model_id)
            retry = handle is not None and handle.state is ModelState.FAILED
            if handle is None:
                handle = self._new_handle(model_id, model_config)
            elif change is not None and change.kind == "engine":
                handle = self._replace(handle, model_config)
            else:
                self._update_live(handle, model_config, change)
            self.clear_failure(handle)
            # Preload what is new, what failed, and what was just marked preload; a model the
            # ttl unloaded stays unloaded until a request comes.
            fresh = handle is not self.handles.get(model_id)
            if model_config.preload and handle.worker is None and (fresh or retry or "preload" in (change.fields if change else ())):
                self._spawn(self._load_logged(handle), f"preload[{model_id}]")
            handles[model_id] = handle
        for model_id, handle in self.handles.items():
            if model_id not in local_models:
                self._cancel_replacement(model_id)
                self._retire(handle, "removed from the config", cause="removed")
        self.handles = handles

    def _update_live(self, handle: ModelHandle, config: ModelConfig, change: ModelChange | None) -> None:
        """Router-only settings: the worker is untouched (a replacement in progress gets them too)."""
        self._apply_server_settings(handle)
        pending = self._replacing.get(handle.model_id)
        if change is None:
            if pending is not None:
                self._apply_server_settings(pending[0])
            return
        if pending is not None:
            self._set_router_config(pending[0], config, change)
            # The serving worker keeps its own engine settings until the replacement takes over.
            config = config.model_copy(update={name: getattr(handle.config, name) for name in ENGINE_FIELDS})
        self._set_router_config(handle, config, change)

    def _set_router_config(self, handle: ModelHandle, config: ModelConfig, change: ModelChange) -> None:
        handle.config = config
        self._apply_server_settings(handle)
        if {"tool_parser", "reasoning_parser"} & set(change.fields) and handle.tokenizer is not None and handle.model_path:
            handle.parsers = _parsers_for(handle, handle.model_path)

    def _replace(self, old: ModelHandle, config: ModelConfig) -> ModelHandle:
        """Start a worker with the new engine settings; returns the handle to route to now."""
        self._cancel_replacement(old.model_id)
        new = self._new_handle(old.model_id, config)
        if old.state not in (ModelState.LOADED, ModelState.IDLE):
            # Nothing is served by the old worker (none, loading, failed): switch at once.
            self._retire(old, "replaced by a reload")
            return new
        new.replaces = old
        task = self._spawn(self._switch_when_ready(old, new), f"replace[{old.model_id}]")
        self._replacing[old.model_id] = (new, task)
        return old

    async def _switch_when_ready(self, old: ModelHandle, new: ModelHandle) -> None:
        model_id = old.model_id
        try:
            await self.ensure_ready(new, timeout_s=None)
        except ModelUnavailableError as exc:
            old.replacement_error = f"a reload's new worker did not start ({exc.message}); the previous one keeps serving"
            logger.error("model %s: %s", model_id, old.replacement_error)
            self._replacing.pop(model_id, None)
            self._retire(new, "its replacement failed", cause="reload")
            return
        self._replacing.pop(model_id, None)
        new.replaces = None
        if self.handles.get(model_id) is old:
            self.handles[model_id] = new
            logger.info("model %s: routing to the new worker (pid %s); draining the old one (pid %s)",
                        model_id, new.worker.pid, old.worker.pid if old.worker else None)
            self._retire(old, "replaced by a reload")
        else:
            self._retire(new, "removed before its replacement was ready", cause="removed")

    def _cancel_replacement(self, model_id: str) -> None:
        pending = self._replacing.pop(model_id, None)
        if pending is not None:
            handle, task = pending
            task.cancel()
            self._retire(handle, "superseded by a newer reload", cause="reload")

    def _retire(self, handle: ModelHandle, reason: str, *, cause: str = "reload") -> None:
        """Stop routing to ``handle``; its worker stops once its requests end (or drain_timeout_s)."""
        handle.retired = True
        self._retiring.add(handle)

        async def drain_and_stop() -> None:
            try:
                await self._unload(handle, reason, cause=cause)
            finally:
                self._retiring.discard(handle)

        self._spawn(drain_and_stop(), f"retire[{handle.model_id}]")

    # ------------------------------------------------------------------ internal

    def _new_handle(self, model_id: str, config: ModelConfig) -> ModelHandle:
        handle = ModelHandle(model_id, config, int(time.time()), metrics=self.metrics)
        self._apply_server_settings(handle)
        return handle

    def _apply_server_settings(self, handle: ModelHandle) -> None:
        server = self.config.server
        handle.heartbeat_s = server.keepalive_s
        handle.allow_request_chat_template = server.allow_request_chat_template
        handle.chat_template_timeout_s = server.chat_template_timeout_s
        handle.log_content = server.log_content

    def _configured(self, model_id: str) -> ModelHandle:
        if model_id not in self.handles:
            raise ModelNotFoundError(model_id)
        return self.handles[model_id]

    def _every_handle(self) -> Iterator[ModelHandle]:
        yield from self.handles.values()
        yield from list(self._retiring)
        yield from (handle for handle, _ in list(self._replacing.values()))

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _load_logged(self, handle: ModelHandle) -> None:
        try:
            await self.ensure_ready(handle, timeout_s=None)
        except ModelUnavailableError as exc:
            logger.error("model %s did not load: %s", handle.model_id, exc.message)

    async def _unload(self, handle: ModelHandle, reason: str, *, cause: str) -> None:
        """Take no new requests, wait for those in flight (drain_timeout_s), stop the worker."""
        worker = handle.worker
        if worker is None:
            return
        handle.draining = True
        try:
            drain_s = self.config.server.drain_timeout_s
            if not await handle.wait_idle(drain_s):
                logger.warning("model %s: %d requests still in flight after %.0fs; stopping its worker",
                               handle.model_id, handle.inflight, drain_s)
            await self._stop_worker(worker)
        finally:
            if handle.worker is worker:
                self._forget_worker(handle)
            handle.draining = False
        self.metrics.model_unloads.labels(handle.model_id, cause).inc()
        logger.info("model %s: worker (pid %s) stopped: %s", handle.model_id, worker.pid, reason)

    def _forget_worker(self, handle: ModelHandle) -> None:
        """Drop the handle's (stopped) worker, keeping its restarts for the metric."""
        self._past_restarts[handle.model_id] = self._past_restarts.get(handle.model_id, 0) + handle.worker.restarts
        handle.worker = None

    def restarts(self, model_id: str) -> int:
        """Crash restarts of ``model_id``'s workers since the router started (a counter)."""
        live = sum(h.worker.restarts for h in self._every_handle() if h.model_id == model_id and h.worker is not None)
        return self._past_restarts.get(model_id, 0) + live

    async def _unload_expired(self) -> None:
        """Unload models idle longer than their ttl (pinned ones never)."""
        while True:
            await asyncio.sleep(TTL_CHECK_S)
            now = time.monotonic()
            for handle in list(self.handles.values()):
                ttl = handle.config.ttl
                if ttl > 0 and not handle.config.pin and handle.state is ModelState.IDLE and now - handle.last_used > ttl:
                    try:
                        await self._unload(handle, f"idle for {ttl:g}s (ttl)", cause="ttl")
                    except Exception:  # one model's failed stop must not end ttl unloading for all
                        logger.exception("model %s: the ttl unload failed", handle.model_id)

    @staticmethod
    async def _stop_worker(worker: WorkerHandle) -> None:
        # A worker writes its prefix cache's queue to disk before it exits: give it that time.
        await worker.stop(timeout_s=STOP_TIMEOUT_S + worker.spec.prefix_cache_flush_timeout_s)

    async def _prepare(self, handle: ModelHandle) -> None:
        """Resolve files, fit the memory budget, load the tokenizer, then create and start the worker."""
        offline = self.config.server.offline
        try:
            path = await anyio.to_thread.run_sync(lambda: resolve_model_path(handle.config.path, offline=offline))
            max_context = read_max_context(path, handle.config.max_context)
            memory = estimate_memory(path, handle.config, max_context)
            vocab_size = read_vocab_size(path)
        except (ModelFilesError, OSError, ValueError) as exc:
            handle.load_error = str(exc)
            raise ModelUnavailableError(f"Model {handle.model_id!r} is unavailable: {exc}", retry_after_s=30.0) from None
        # Held until the worker exists, so two loads never both count on the same free memory.
        async with self._budget_lock:
            await self._make_room(handle, memory)
            try:
                handle.tokenizer = await anyio.to_thread.run_sync(lambda: _load_tokenizer(path))
                handle.parsers = _parsers_for(handle, path)
            except (ModelFilesError, ParserConfigError) as exc:
                handle.load_error = str(exc)
                raise ModelUnavailableError(f"Model {handle.model_id!r} is unavailable: {exc}", retry_after_s=30.0) from None
            handle.model_path, handle.max_context, handle.memory, handle.checkpoint_vocab_size = path, max_context, memory, vocab_size
            handle.worker = WorkerHandle(self._worker_spec(handle, path), crash_limit=self.config.server.crash_limit,
                                         crash_window_s=self.config.server.crash_window_s,
                                         env=self._blas.worker_env(os.environ))
            handle.worker.start()
        self._spawn(self._count_load(handle.model_id, handle.worker), f"load[{handle.model_id}]")
        logger.info("model %s: starting its worker (memory estimate %s)", handle.model_id, memory.describe())

    async def _count_load(self, model_id: str, worker: WorkerHandle) -> None:
        started = time.perf_counter()
        try:
            await worker.wait_ready(None)
        except (WorkerLoadError, WorkerNotReadyError):
            self.metrics.model_loads.labels(model_id, "failed").inc()
            return
        self.metrics.model_loads.labels(model_id, "ready").inc()
        self.metrics.load_seconds.labels(model_id).observe(time.perf_counter() - started)

    async def _make_room(self, handle: ModelHandle, memory: MemoryEstimate) -> None:
        """Unload idle unpinned models until ``handle`` fits the budget, or refuse with the reason."""
        budget = int(self.config.server.memory_budget_gb * GB)
        if budget <= 0:
            return
        # The worker a replacement takes over from is on its way out: it does not count.
        resident = [_resident(h) for h in self._every_handle()
                    if h is not handle and h is not handle.replaces and h.worker is not None and h.memory is not None]
        victims = plan_eviction(resident, memory.total_bytes, budget)
        if victims is None:
            raise ModelUnavailableError(no_room_message(handle.model_id, memory, budget, resident), retry_after_s=30.0)
        by_id = {h.model_id: h for h in self.handles.values()}
        for victim in victims:
            logger.info("model %s: unloading idle %s to fit the memory budget", handle.model_id, victim.model_id)
            self.metrics.model_evictions.labels(victim.model_id).inc()
            await self._unload(by_id[victim.model_id], f"made room for {handle.model_id} (memory_budget_gb)", cause="budget")

    def _worker_spec(self, handle: ModelHandle, path: Path) -> WorkerSpec:
        return WorkerSpec(
            model_id=handle.model_id,
            model_path=str(path),
            # One name per worker: a reload's new worker starts while the old one still serves.
            socket_path=str(self._runtime_dir / _socket_name(handle.model_id, self._instance + secrets.token_hex(2))),
            token=secrets.token_hex(16),
            max_concurrency=handle.config.max_concurrency,
            prefill_step=handle.config.prefill_step,
            max_context=handle.max_context,
            log_level=self.config.server.log_level,
            # A sharded model's ranks cannot share one prefix cache's decisions (engines/shard/worker.py).
            **(_prefix_cache_spec(handle.config.prefix_cache, self._runtime_dir / "prefix-cache" / handle.model_id)
               if not handle.config.shard.enabled else {}),
            **_kv_cache_spec(handle.config.kv_cache),
            shard=_shard_spec(handle.config.shard),
        )


def _raise_if_unavailable(handle: ModelHandle) -> None:
    state = handle.state
    if state is ModelState.FAILED:
        raise ModelUnavailableError(f"Model {handle.model_id!r} failed to load: {handle.last_error}", retry_after_s=30.0)
    if state is ModelState.DRAINING and not handle.retired:
        raise ModelUnavailableError(f"Model {handle.model_id!r} is unloading; it loads again after.", retry_after_s=2.0)
    if handle.worker is not None and handle.worker.state is WorkerState.FAILED:
        raise ModelUnavailableError(f"Model {handle.model_id!r} is restarting after a crash.", retry_after_s=2.0)


def _resident(handle: ModelHandle) -> Resident:
    state = handle.state
    why = "pinned" if handle.config.pin else {ModelState.LOADED: "busy"}.get(state, state.value)
    evictable = state is ModelState.IDLE and not handle.config.pin and not handle.retired
    return Resident(handle.model_id, handle.memory.total_bytes, handle.last_used, evictable, "" if evictable else why)


def _prefix_cache_spec(config, default_dir: Path) -> dict[str, Any]:
    if not config.enabled or config.memory_gb <= 0:
        return {"prefix_cache_bytes": 0}
    spec: dict[str, Any] = {"prefix_cache_bytes": int(config.memory_gb * 2**30), "prefix_cache_min_tokens": config.min_tokens}
    if config.persist and config.disk_gb > 0:
        spec.update(prefix_cache_dir=str(Path(config.dir).expanduser() if config.dir else default_dir),
                    prefix_cache_disk_bytes=int(config.disk_gb * 2**30), prefix_cache_flush_timeout_s=config.flush_timeout_s)
    return spec


def _shard_spec(config) -> ShardSpec | None:
    if not config.enabled:
        return None
    return ShardSpec(hosts=list(config.host_list), backend=config.backend, mode=config.mode, hostfile=config.hostfile)


def _kv_cache_spec(config) -> dict[str, int]:
    return {"kv_bits": config.bits, "kv_group_size": config.group_size, "kv_quantize_after": config.quantize_after,
            "kv_window": config.window}


def _load_tokenizer(path: Path):
    from mlx_lm.utils import load_tokenizer

    config = json.loads((path / "config.json").read_text())
    eos = config.get("eos_token_id")
    eos_ids = [eos] if isinstance(eos, int) else eos
    try:
        return load_tokenizer(path, eos_token_ids=eos_ids)
    except (OSError, ValueError) as exc:
        raise ModelFilesError(f"cannot load the tokenizer from {path}: {exc}") from None


def _parsers_for(handle: ModelHandle, path: Path) -> ParserChoice:
    tokenizer = handle.tokenizer
    choice = choose_parsers(
        path,
        tool_parser=handle.config.tool_parser,
        reasoning_parser=handle.config.reasoning_parser,
        chat_template=tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None,
        special_tokens=[str(t) for t in tokenizer.added_tokens_decoder.values()],
        model_name=handle.config.path,
    )
    logger.info("model %s: tool parser %s (%s); reasoning parser %s (%s)", handle.model_id,
                choice.tool_parser, choice.tool_reason, choice.reasoning_parser, choice.reasoning_reason)
    return choice


def _is_glob(alias: str) -> bool:
    return any(ch in alias for ch in "*?[")


def _socket_name(model_id: str, instance: str) -> str:
    """A short, unique name: readable prefix, a hash of the whole id, this router's instance.

    Short because a Unix socket path has at most 104 bytes on macOS, runtime dir included.
    """
    readable = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model_id)[:20]
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:8]
    return f"{readable}-{digest}-{instance}.sock"
