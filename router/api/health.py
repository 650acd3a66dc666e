"""Liveness, readiness and the root path that some clients probe."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response
from litestar.di import NamedDependency
from litestar.response import Redirect

from router.http.browser import wants_html
from router.http.methods import get_or_head
from router.pool import ModelPool


class HealthController(Controller):
    path = "/"

    @get_or_head("/health", opt={"open": True})  # for probes: no key, and says nothing about models
    async def health(self) -> dict[str, str]:
        """Alive: the router answers (models may still be loading)."""
        return {"status": "ok"}

    @get_or_head("/ready")
    async def ready(self, pool: NamedDependency[ModelPool]) -> Response[dict[str, Any]]:
        """Ready: every preloaded model serves; 503 until then, with each model's state."""
        states = {model_id: handle.state.value for model_id, handle in pool.handles.items()}
        ready = pool.is_ready()
        return Response({"status": "ready" if ready else "loading", "models": states}, status_code=200 if ready else 503)

    # A browser is sent to the status page (before any key check: the page asks for the key itself).
    @get_or_head("/", opt={"browser_redirect": True})
    async def root(self, request: Request) -> Response[dict[str, str]] | Redirect:
        if wants_html(request):
            return Redirect("/ui", status_code=303)
        return Response({"status": "ok", "service": "rapid-mlx"})
