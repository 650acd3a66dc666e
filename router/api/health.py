"""Liveness, readiness and the root path that some clients probe."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Response

from router.http.methods import get_or_head
from router.pool import ModelPool


class HealthController(Controller):
    path = "/"

    @get_or_head("/health", opt={"open": True})  # for probes: no key, and says nothing about models
    async def health(self) -> dict[str, str]:
        """Alive: the router answers (models may still be loading)."""
        return {"status": "ok"}

    @get_or_head("/ready")
    async def ready(self, pool: ModelPool) -> Response[dict[str, Any]]:
        """Ready: every preloaded model serves; 503 until then, with each model's state."""
        states = {model_id: handle.state.value for model_id, handle in pool.handles.items()}
        ready = pool.is_ready()
        return Response({"status": "ready" if ready else "loading", "models": states}, status_code=200 if ready else 503)

    @get_or_head("/")
    async def root(self) -> dict[str, str]:
        return {"status": "ok", "service": "rapid-mlx"}
