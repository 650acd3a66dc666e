"""Admission: how many generations each model holds against ``max_concurrency + max_queue``.

Counting is check-and-take in one synchronous step (no ``await`` between the check and the
increment), so a burst of requests on new connections cannot all pass the check before any
of them counts. Every generation counts: a ``/v1/completions`` request with 64 prompts takes
64 places.

A request keeps its places until its HTTP exchange ends, streamed body included:
``release_admissions`` (an ASGI middleware) gives back whatever the request took when the
exchange is over, however it ended (a response, an error, a client that went away before a
stream even started).

A request holds its places on a model once. Spillover routing takes them in the same step as it
decides "local, there is room" (router/api/fleet.py), before the endpoint awaits the worker; the
endpoint's own ``admit`` for that model then takes nothing more. Deciding first and taking after
an ``await`` let a burst all see the same room, and some of it got 429 instead of spilling.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from litestar.types import ASGIApp, Receive, Scope, Send

from router.errors import InvalidRequestError, OverloadedError

if TYPE_CHECKING:
    from router.pool import ModelHandle


@dataclass
class _Admissions:
    """What the current HTTP request took: what gives it back, and its places per model."""

    releases: list[Callable[[], None]] = field(default_factory=list)
    held: dict[int, int] = field(default_factory=dict)  # id(handle) -> places; releases keep each handle alive


# Set per request by ``release_admissions``.
_current: contextvars.ContextVar[_Admissions | None] = contextvars.ContextVar("rapidmlx_admissions", default=None)


def admit(handle: ModelHandle, count: int = 1) -> None:
    """Take ``count`` places on ``handle`` for the current request, or refuse.

    A request that already holds places on ``handle`` takes only what it lacks of ``count``.

    Raises:
        InvalidRequestError: ``count`` alone exceeds the model's limit (it could never run).
        OverloadedError: the model has no room now (429, with Retry-After).
        RuntimeError: called outside an HTTP request (no scope to release it).
    """
    limit = handle.config.max_concurrency + handle.config.max_queue
    if count > limit:
        raise InvalidRequestError(
            f"This request needs {count} generations at once; model {handle.model_id!r} runs at most {limit}.", param="prompt")
    admissions = _admissions()
    missing = count - admissions.held.get(id(handle), 0)
    if missing <= 0:
        return
    if handle.inflight + missing > limit:
        raise OverloadedError(
            f"Model {handle.model_id!r} has {handle.inflight} requests in flight (limit {limit}); try again in 1s.",
            retry_after_s=1.0,
        )
    handle.take(missing)
    admissions.held[id(handle)] = count
    admissions.releases.append(lambda: handle.give_back(missing))


def on_release(callback: Callable[[], None]) -> None:
    """Run ``callback`` when the current request's HTTP exchange is over (per-key limits use it)."""
    _admissions().releases.append(callback)


def _admissions() -> _Admissions:
    admissions = _current.get()
    if admissions is None:
        raise RuntimeError("admission needs the release_admissions middleware around the request")
    return admissions


def release_admissions(app: ASGIApp) -> ASGIApp:
    """Middleware: give back every place a request took once its exchange is over."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        admissions = _Admissions()
        token = _current.set(admissions)
        try:
            await app(scope, receive, send)
        finally:
            _current.reset(token)
            for give_back in admissions.releases:
                give_back()

    return middleware
