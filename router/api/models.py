"""GET /v1/models and /v1/models/{id}: one entry shape that both SDKs parse (api-conformance §4)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from litestar import Controller

from router.api.dispatch import allowed_model
from router.ops.auth.guard import current_key
from router.ops.auth.keys import may_use
from router.http.methods import get_or_head
from router.pool import ModelHandle, ModelPool


def model_entry(handle: ModelHandle, name: str | None = None) -> dict[str, Any]:
    """OpenAI's Model fields plus Anthropic's ModelInfo fields, so either client can list models."""
    model_id = name or handle.model_id
    return {
        "id": model_id,
        "object": "model",
        "created": handle.created,
        "owned_by": "rapid-mlx",
        "type": "model",
        "display_name": model_id,
        "created_at": datetime.fromtimestamp(handle.created, tz=timezone.utc).isoformat().replace("+00:00", "Z"),
        "lifecycle": "active",
        "max_context": handle.max_context or None,
        "state": handle.state.value,
    }


class ModelsController(Controller):
    path = "/v1/models"

    @get_or_head()
    async def list_models(self, pool: ModelPool) -> dict[str, Any]:
        key = current_key.get()
        data = [model_entry(handle) for handle in pool.handles.values() if may_use(key, handle.model_id, handle.model_id)]
        return {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    @get_or_head("/{model_name:path}")
    async def retrieve(self, pool: ModelPool, model_name: str) -> dict[str, Any]:
        name = model_name.lstrip("/")
        return model_entry(allowed_model(pool, name), name)
