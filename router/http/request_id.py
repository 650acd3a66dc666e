"""Request ids: every response carries ``x-request-id`` and every router log line of its request.

The client's own ``x-request-id`` is kept when it is a sane token (agents and proxies send one
to correlate); otherwise one is made. The id lives in a context variable for the request's
task, and ``RequestIdFilter`` puts it on every log record (``-`` outside a request).
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
_ACCEPTED = re.compile(rb"[A-Za-z0-9._:-]{1,128}")

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("rapidmlx_request_id", default="-")
# perf_counter when the request reached the app: where its latencies (TTFT, end to end) start.
arrived_at: contextvars.ContextVar[float | None] = contextvars.ContextVar("rapidmlx_arrived_at", default=None)


class RequestIdMiddleware(ASGIMiddleware):
    """Sets the request's id for its log lines; ``add_request_id_header`` puts it on the response."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        sent = dict(scope["headers"]).get(HEADER, b"")
        value = sent.decode() if _ACCEPTED.fullmatch(sent) else _new_id()
        scope["state"]["request_id"] = value
        token, arrival = request_id.set(value), arrived_at.set(time.perf_counter())
        try:
            await next_app(scope, receive, send)
        finally:
            request_id.reset(token)
            arrived_at.reset(arrival)


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` (for a ``%(request_id)s`` in the log format)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


async def add_request_id_header(message: Message, scope: Scope) -> None:
    """``before_send``: the id on every response, also those no route handled (a 404 for an unknown path)."""
    if message["type"] == "http.response.start":
        value = scope.get("state", {}).get("request_id") or _new_id()
        headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != HEADER]
        message["headers"] = [*headers, (HEADER, value.encode())]


def _new_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"
