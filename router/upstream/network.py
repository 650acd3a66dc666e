"""The upstream client's sockets: httpcore's own network backend, with a request's writes sent as one.

httpcore writes an HTTP/1.1 request as separate socket sends: the head, then the body (then an empty
end of message). On loopback each send is a syscall that runs the receiver's TCP stack too, and the
front's profile had socket writes as the largest share of a proxied request's CPU (docs/benchmarks.md,
"One upstream hop"). A client never needs its request on the wire before it reads the response, so
``CoalescingStream`` holds writes until the next read (or until enough is held to be worth a send of
its own) and sends them in one.

httpcore takes a network backend as a documented extension point; httpx's transport does not pass
one through, so ``upstream_transport`` builds its connection pool with the same arguments httpx would.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

__all__ = ["CoalescingBackend", "CoalescingStream", "upstream_transport"]

logger = logging.getLogger(__name__)

# Held bytes past this go out at once: a large body streams in pieces rather than all at the end.
FLUSH_AT_BYTES = 64 * 1024


class CoalescingStream(httpcore.AsyncNetworkStream):
    """A network stream whose writes wait for the next read (or ``FLUSH_AT_BYTES``) and go out as one send."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._write_timeout: float | None = None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._held.append(buffer)
        self._held_bytes += len(buffer)
        self._write_timeout = timeout
        if self._held_bytes >= FLUSH_AT_BYTES:
            await self._flush()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            await self._flush()
        except httpcore.WriteError:
            # httpcore does the same with its own writes: a server may answer early and close (a
            # 413 for a body it will not read), and the read then says what happened.
            logger.debug("upstream write failed; reading its answer", exc_info=True)
        return await self._inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        # What is still held belongs to a request being abandoned (httpcore closes on errors and
        # cancellation): dropped, as the send it was waiting for will not happen.
        self._held.clear()
        self._held_bytes = 0
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        await self._flush()
        return CoalescingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    async def _flush(self) -> None:
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        await self._inner.write(data, self._write_timeout)


class CoalescingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default async backend (AnyIO), its streams wrapped in ``CoalescingStream``."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        return CoalescingStream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        return CoalescingStream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def upstream_transport(limits: httpx.Limits, socket_options: Iterable[Any]) -> httpx.AsyncHTTPTransport:
    """httpx's transport for an upstream, on a connection pool whose streams coalesce writes.

    The pool is built as ``httpx.AsyncHTTPTransport`` builds its own when no proxy is set (same SSL
    context, limits and socket options); httpx has no argument for the network backend.
    """
    options = list(socket_options)
    transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=options)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        socket_options=options,
        network_backend=CoalescingBackend(),
    )
    return transport
