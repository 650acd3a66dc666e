"""create_app: the Litestar application, its routes, error handlers and the pool's lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide

from router.api.anthropic.controller import MessagesController
from router.api.health import HealthController
from router.api.models import ModelsController
from router.api.openai.chat import ChatCompletionsController
from router.api.openai.completions import CompletionsController
from router.api.responses.controller import ResponsesController
from router.admission import release_admissions
from router.ops.config import RouterConfig, resolve_runtime_dir
from router.ops.status import StatusController
from router.errors import handle_exception
from router.http.body_timeout import BodyTimeoutMiddleware
from router.pool import ModelPool
from router.api.responses.store import ResponseStore


def create_app(config: RouterConfig, *, runtime_dir: Path | None = None) -> Litestar:
    """Build the app; workers start in the lifespan, so HTTP answers while models load."""
    pool = ModelPool(config, runtime_dir or resolve_runtime_dir(config.server))

    @contextlib.asynccontextmanager
    async def run_pool(app: Litestar) -> AsyncIterator[None]:
        await pool.start()
        try:
            yield
        finally:
            await pool.stop()

    def provide_pool(state: State) -> ModelPool:
        return state.pool

    def provide_responses(state: State) -> ResponseStore:
        return state.responses

    return Litestar(
        route_handlers=[
            HealthController, ModelsController, ChatCompletionsController, CompletionsController,
            ResponsesController, MessagesController, StatusController,
        ],
        dependencies={
            "pool": Provide(provide_pool, sync_to_thread=False),
            "responses": Provide(provide_responses, sync_to_thread=False),
        },
        exception_handlers={Exception: handle_exception},
        middleware=[release_admissions, BodyTimeoutMiddleware(config.server.body_timeout_s)],
        lifespan=[run_pool],
        state=State({"pool": pool, "responses": ResponseStore()}),
        request_max_body_size=int(config.server.max_body_mb * 1024 * 1024),
        openapi_config=None,
    )
