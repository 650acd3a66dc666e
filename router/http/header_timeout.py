"""Header timeout for uvicorn's h11 protocol: a request line + headers that do not arrive in time get a 408.

uvicorn has no such limit: a client that connects and sends nothing, or trickles its headers a byte at a
time, holds a connection (and a file descriptor) for as long as it likes. This module owns that deadline,
per connection; the body deadline, once the headers are in, belongs to `body_timeout.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from router.errors import RequestTimeoutError, error_body

logger = logging.getLogger(__name__)


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's head.

    The clock starts when the connection opens, and on a keep-alive connection when the next request's
    first byte arrives (an idle keep-alive connection is uvicorn's ``timeout_keep_alive`` business, and is
    closed silently). It stops once h11 has parsed the request line and headers.
    """

    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync_header_timer()

    def on_response_complete(self) -> None:
        # May start the next cycle and parse pipelined bytes already buffered.
        super().on_response_complete()
        self._sync_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _sync_header_timer(self) -> None:
        """Run the clock exactly while part of a request head is buffered and not yet parsed."""
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            self._cancel_header_timer()  # headers parsed (or the connection is done for)
        elif self._header_timer is None and self.conn.trailing_data[0]:
            self._arm_header_timer()  # the first bytes of the next request on a kept-alive connection

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._on_header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        client = "%s:%d" % self.client if self.client else "unknown client"
        logger.info("%s: request headers incomplete after %gs; 408 and close", client, self.header_timeout_s)
        # No request line yet, so no path to pick an API dialect by: OpenAI's shape, as for any unknown route.
        error = RequestTimeoutError(f"The request headers did not arrive within {self.header_timeout_s:g} seconds.")
        body = json.dumps(error_body(error)).encode()
        headers = [
            *self.server_state.default_headers,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            # h11 lets a server answer before the client's request is complete: this is the 408 case.
            output = b"".join(
                self.conn.send(event) or b""
                for event in (h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"), h11.Data(data=body), h11.EndOfMessage())
            )
        except h11.LocalProtocolError:
            logger.debug("%s: cannot send 408 in h11 state %s; closing", client, self.conn.states)
        else:
            self.transport.write(output)
        self.transport.close()


def header_timeout_protocol(timeout_s: float) -> type[H11Protocol]:
    """The protocol class to pass as ``uvicorn.run(..., http=...)``, with this header deadline."""
    return type("HeaderTimeoutH11Protocol", (HeaderTimeoutH11Protocol,), {"header_timeout_s": timeout_s})
