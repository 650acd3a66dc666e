"""Admission: how many generations each model holds against ``max_concurrency + max_queue``.

Counting is check-and-take in one synchronous step (no ``await`` between the check and the
increment), so a burst of requests on new connections cannot all pass the check before any
of them counts. Every generation counts: a ``/v1/completions`` request with 64 prompts takes
64 places.

A request keeps its places until its HTTP exchange ends, streamed body included:
``release_admissions`` (an ASGI middleware) gives back whatever the request took when the
exchange is over, however it ended (a response, an error, a client that went away before a
stream even started).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING

from litestar.types import ASGIApp, Receive, Scope, Send

from router.errors import InvalidRequestError, OverloadedError

if TYPE_CHECKING:
    from router.pool import ModelHandle

# What gives back the places the current HTTP request took; set per request by ``release_admissions``.
_taken: contextvars.ContextVar[list[Callable[[], None]] | None] = contextvars.ContextVar("rapidmlx_admissions", default=None)


def admit(handle: ModelHandle, count: int = 1) -> None:
    """Take ``count`` places on ``handle`` for the current request, or refuse.

    Raises:
        InvalidRequestError: ``count`` alone exceeds the model's limit (it could never run).
        OverloadedError: the model has no room now (429, with Retry-After).
        RuntimeError: called outside an HTTP request (no scope to release it).
    """
    limit = handle.config.max_concurrency + handle.config.max_queue
    if count > limit:
        raise InvalidRequestError(
            f"This request needs {count} generations at once; model {handle.model_id!r} runs at most {limit}.", param="prompt")
    if handle.inflight + count > limit:
        raise OverloadedError(
            f"Model {handle.model_id!r} has {handle.inflight} requests in flight (limit {limit}); try again in 1s.",
            retry_after_s=1.0,
        )
    release = _release_list()
    handle.take(count)
    release.append(lambda: handle.give_back(count))


def on_release(callback: Callable[[], None]) -> None:
    """Run ``callback`` when the current request's HTTP exchange is over (per-key limits use it)."""
    _release_list().append(callback)


def _release_list() -> list[Callable[[], None]]:
    taken = _taken.get()
    if taken is None:
        raise RuntimeError("admission needs the release_admissions middleware around the request")
    return taken


def release_admissions(app: ASGIApp) -> ASGIApp:
    """Middleware: give back every place a request took once its exchange is over."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        taken: list[Callable[[], None]] = []
        token = _taken.set(taken)
        try:
            await app(scope, receive, send)
        finally:
            _taken.reset(token)
            for give_back in taken:
                give_back()

    return middleware
