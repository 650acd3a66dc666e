"""create_app: the Litestar application, its routes, error handlers, and the lifespan that runs the
pool and the reload triggers (the file watcher and SIGHUP; ``POST /admin/reload`` is a route)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.di import Provide

from router.api.anthropic.controller import MessagesController
from router.api.fleet import add_served_by_header
from router.api.health import HealthController
from router.api.models import ModelsController
from router.api.openai.chat import ChatCompletionsController
from router.api.openai.completions import CompletionsController
from router.api.responses.controller import ResponsesController
from router.admission import release_admissions
from router.ops.config import RouterConfig, resolve_runtime_dir
from router.ops.admin import AdminController
from router.ops.ui.controller import StatusPageController
from router.ops.auth.guard import Access, require_key
from router.ops.metrics.families import Metrics
from router.ops.metrics.http import MetricsController, counting_hook
from router.ops.metrics.workers import PoolCollector
from router.ops.reload.reloader import Reloader
from router.ops.reload.watch import watch_config_file
from router.errors import handle_exception
from router.http.body_timeout import BodyTimeoutMiddleware
from router.http.disconnect import CancelOnDisconnect
from router.http.request_id import RequestIdMiddleware, add_request_id_header
from router.pool import ModelPool
from router.api.responses.store import ResponseStore
from router.upstream.registry import Upstreams


logger = logging.getLogger(__name__)


def create_app(config: RouterConfig, *, runtime_dir: Path | None = None, config_path: Path | None = None,
               config_text: str | None = None, env: Mapping[str, str] | None = None,
               overrides: Mapping[str, Any] | None = None) -> Litestar:
    """Build the app; workers start in the lifespan, so HTTP answers while models load.

    ``config_path`` is the file reloads read (with the same ``env`` and ``overrides`` the config was
    loaded with); without it the config is fixed (the demo).
    """
    metrics = Metrics()
    pool = ModelPool(config, runtime_dir or resolve_runtime_dir(config.server), metrics)
    collector = PoolCollector(pool)
    metrics.registry.register(collector)
    access = Access()
    access.update(config, env)
    upstreams = Upstreams(config, env=env, metrics=metrics)
    reloader = Reloader(pool, config_path, text=config_text, env=env, overrides=overrides, access=access, upstreams=upstreams)
    _warn_if_open(config)

    @contextlib.asynccontextmanager
    async def run_pool(app: Litestar) -> AsyncIterator[None]:
        await pool.start()
        upstreams.start()
        stop_watching = asyncio.Event()
        watcher = None
        if config_path is not None and config.server.watch_config:
            watcher = asyncio.create_task(watch_config_file(config_path, lambda: reloader.reload("watch"), stop_event=stop_watching))
            if reloader.file_changed():  # edited between loading it and watching it
                reloader.reload("watch")
        on_sighup = _add_signal_handler(signal.SIGHUP, lambda: reloader.reload("sighup")) if config_path is not None else False
        try:
            yield
        finally:
            if on_sighup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            stop_watching.set()
            if watcher is not None:
                await watcher
            await pool.stop()
            await upstreams.stop()

    def provide_pool(state: State) -> ModelPool:
        return state.pool

    def provide_responses(state: State) -> ResponseStore:
        return state.responses

    def provide_reloader(state: State) -> Reloader:
        return state.reloader

    def provide_metrics(state: State) -> Metrics:
        return state.metrics

    def provide_collector(state: State) -> PoolCollector:
        return state.collector

    def provide_upstreams(state: State) -> Upstreams:
        return state.upstreams

    def provide_access(state: State) -> Access:
        return state.access

    return Litestar(
        route_handlers=[
            HealthController, ModelsController, ChatCompletionsController, CompletionsController,
            ResponsesController, MessagesController, AdminController, MetricsController,
            StatusPageController,
        ],
        dependencies={
            "pool": Provide(provide_pool, sync_to_thread=False),
            "responses": Provide(provide_responses, sync_to_thread=False),
            "reloader": Provide(provide_reloader, sync_to_thread=False),
            "metrics": Provide(provide_metrics, sync_to_thread=False),
            "collector": Provide(provide_collector, sync_to_thread=False),
            "upstreams": Provide(provide_upstreams, sync_to_thread=False),
            "access": Provide(provide_access, sync_to_thread=False),
        },
        exception_handlers={Exception: handle_exception},
        middleware=[RequestIdMiddleware(), release_admissions, CancelOnDisconnect(), BodyTimeoutMiddleware(config.server.body_timeout_s)],
        before_send=[add_request_id_header, add_served_by_header, counting_hook(metrics)],
        lifespan=[run_pool],
        state=State({"pool": pool, "responses": ResponseStore(), "reloader": reloader, "access": access, "metrics": metrics,
                     "collector": collector, "upstreams": upstreams}),
        guards=[require_key],
        cors_config=CORSConfig(allow_origins=list(config.server.cors_origins)) if config.server.cors_origins else None,
        request_max_body_size=int(config.server.max_body_mb * 1024 * 1024),
        openapi_config=None,
        logging_config=None,  # the process's logging is `rapid-mlx serve`'s (one format, with request ids)
    )


def _warn_if_open(config: RouterConfig) -> None:
    if not config.keys and config.server.host not in ("127.0.0.1", "::1", "localhost"):
        logger.warning("no [[keys]] configured and bound to %s: anyone who can reach the port can use every model",
                       config.server.host)


def _add_signal_handler(sig: signal.Signals, callback) -> bool:
    """Handle ``sig`` in the event loop; False where that is impossible (not the main thread, Windows)."""
    try:
        asyncio.get_running_loop().add_signal_handler(sig, callback)
    except (NotImplementedError, RuntimeError, ValueError) as exc:
        logger.info("no %s handler here (%s): reload with POST /admin/reload", sig.name, exc)
        return False
    return True
