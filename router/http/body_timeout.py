"""Body timeout: a request body that has not fully arrived in time ends in a 408.

The deadline runs from when the request reaches the app (its headers are in) until the last body chunk.
It is enforced in ``receive``, so the 408 is raised inside the controller's ``await request.body()`` and
rendered by `router.errors` in the route's own dialect (OpenAI, or Anthropic under /v1/messages).
"""

from __future__ import annotations

import asyncio
import logging

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from router.errors import RequestTimeoutError

logger = logging.getLogger(__name__)


class BodyTimeoutMiddleware(ASGIMiddleware):
    """Puts a deadline on each HTTP request's body."""

    scopes = (ScopeType.HTTP,)

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        await next_app(scope, body_deadline(receive, self.timeout_s, where=scope["path"]), send)


def body_deadline(receive: Receive, timeout_s: float, *, where: str = "") -> Receive:
    """Wrap ``receive`` so the body's chunks must all arrive within ``timeout_s`` from now.

    Once the body is complete, calls pass straight through: a streaming response waits on ``receive``
    for the client's disconnect, for as long as the stream lasts.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    body_done = False

    async def receive_with_deadline() -> Message:
        nonlocal body_done
        if body_done:
            return await receive()
        try:
            async with asyncio.timeout_at(deadline):
                message = await receive()
        except TimeoutError:
            logger.info("%s: request body incomplete after %gs; 408 and close", where, timeout_s)
            raise RequestTimeoutError(f"The request body did not arrive within {timeout_s:g} seconds.") from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            body_done = True
        return message

    return receive_with_deadline
