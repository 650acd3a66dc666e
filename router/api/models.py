"""GET /v1/models and /v1/models/{id}: one entry shape that both SDKs parse (api-conformance §4)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from litestar import Controller
from litestar.di import NamedDependency
from litestar.params import FromPath

from router.api.fleet import allowed_target
from router.ops.auth.guard import current_key
from router.ops.auth.keys import may_use
from router.http.methods import get_or_head
from router.pool import ModelHandle, ModelPool
from router.upstream.client import Upstream
from router.upstream.registry import Upstreams


def model_entry(handle: ModelHandle | Upstream, name: str | None = None) -> dict[str, Any]:
    """OpenAI's Model fields plus Anthropic's ModelInfo fields, so either client can list models."""
    model_id = name or handle.model_id
    if isinstance(handle, Upstream):
        return {**_entry(model_id, handle.created), "max_context": None, "state": handle.health.state.value}
    return {**_entry(model_id, handle.created), "max_context": handle.max_context or None, "state": handle.state.value}


def _entry(model_id: str, created: int) -> dict[str, Any]:
    return {
        "id": model_id,
        "object": "model",
        "created": created,
        "owned_by": "rapid-mlx",
        "type": "model",
        "display_name": model_id,
        "created_at": datetime.fromtimestamp(created, tz=timezone.utc).isoformat().replace("+00:00", "Z"),
        "lifecycle": "active",
    }


class ModelsController(Controller):
    path = "/v1/models"

    @get_or_head()
    async def list_models(self, pool: NamedDependency[ModelPool], upstreams: NamedDependency[Upstreams]) -> dict[str, Any]:
        key = current_key.get()
        targets = [pool.handles.get(model_id) or upstreams.get(model_id) for model_id in pool.config.models]
        data = [model_entry(target) for target in targets if target is not None and may_use(key, target.model_id, target.model_id)]
        return {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    @get_or_head("/{model_name:path}")
    async def retrieve(self, pool: NamedDependency[ModelPool], upstreams: NamedDependency[Upstreams],
                       model_name: FromPath[str]) -> dict[str, Any]:
        name = model_name.lstrip("/")
        return model_entry(allowed_target(pool, upstreams, name), name)
