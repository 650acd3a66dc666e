"""A client that goes away cancels its request, so its generation is aborted in the worker.

This middleware is the one place that notices: a non-streaming handler awaits the whole
generation, and the SSE responses (router/sse.py) leave out Litestar's own disconnect listener.
Without it, a client that gives up after 30 s would leave its request generating to
``max_tokens``, holding a batch slot and a queue place for others. Once the request body has been
read, it listens for the disconnect and cancels the request's task, streaming or not; cancelling
closes the worker stream, whose cleanup sends the abort (engines/client.py). The app's own later
``receive`` calls get the same disconnect from here, so only one reader ever waits on the
server's ``receive``.
"""

from __future__ import annotations

import asyncio

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

DISCONNECT: Message = {"type": "http.disconnect"}


class CancelOnDisconnect(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        body_read = asyncio.Event()
        disconnected = asyncio.Event()
        responded = False  # the last body chunk is out: from then on nothing is cancelled

        async def app_receive() -> Message:
            if body_read.is_set():
                await disconnected.wait()
                return DISCONNECT
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
            elif not message.get("more_body", False):
                body_read.set()
            return message

        async def app_send(message: Message) -> None:
            nonlocal responded
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                responded = True  # before the send, which may yield to the watcher
            await send(message)

        handler = asyncio.current_task()
        cancelled_here = False

        async def watch() -> None:
            nonlocal cancelled_here
            await body_read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()
            # The server also reports a disconnect once the response is complete; the app may
            # still be unwinding then (releasing its admission), which must not be cut short.
            if not responded:
                cancelled_here = True
                handler.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await next_app(scope, app_receive, app_send)
        except asyncio.CancelledError:
            if not cancelled_here:
                raise
            handler.uncancel()  # ours, and handled: the client is gone, there is no one to answer
        finally:
            watcher.cancel()
