"""Which HTTP methods a read-only route answers: every GET route also answers HEAD."""

from __future__ import annotations

from typing import Any

from litestar import route
from litestar.enums import HttpMethod
from litestar.handlers import HTTPRouteHandler

# HEAD carries GET's status and headers without the body; uvicorn drops the body bytes
# for HEAD itself, so one handler serves both. Uptime monitors and `curl -I` send HEAD.
_GET_AND_HEAD = [HttpMethod.GET, HttpMethod.HEAD]


def get_or_head(path: str | list[str] | None = None, **kwargs: Any) -> HTTPRouteHandler:
    """Like ``litestar.get``, but the route answers HEAD too."""
    return route(path, http_method=_GET_AND_HEAD, **kwargs)
