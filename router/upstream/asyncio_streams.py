"""The upstream connections' sockets on asyncio's own transports, for httpcore (``AsyncioBackend``).

httpcore's default backend goes through anyio, whose socket stream asks the event loop to watch the
socket again for every read and to stop after it (``resume_reading`` / ``pause_reading``: two
``epoll_ctl`` calls and the selector's bookkeeping) and wraps each read and write in a cancel scope
for its timeout. A proxied stream reads once per event, and each read costs the front's hop that
work (docs/benchmarks.md). Here the transport keeps reading into a buffer, a read takes what has
arrived or waits on one future, and a timeout is one timer handle. Reading pauses only when more
than ``_HIGH_WATER`` bytes wait unread, as asyncio's own streams do.

The errors are httpcore's (``ConnectError``, ``ReadTimeout``, ...), so httpx maps them as it does
for its own backend.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import typing

import httpcore

__all__ = ["AsyncioBackend"]

_HIGH_WATER = 256 * 1024


class _BufferingProtocol(asyncio.Protocol):
    """What the transport delivers, kept until the stream reads it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.at_eof = False
        self.error: Exception | None = None
        self._reader: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None

    # -- transport callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        self.at_eof = True
        self._wake_reader()
        return False  # nothing more to read: let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.at_eof = True
        self.error = exc
        self._wake_reader()
        self.resume_writing()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None:
            if not self._writable.done():
                self._writable.set_result(None)
            self._writable = None

    # -- the stream's side
    def take(self, max_bytes: int) -> bytes:
        chunk = self.chunks.popleft()
        if len(chunk) > max_bytes:
            chunk, rest = chunk[:max_bytes], chunk[max_bytes:]
            self.chunks.appendleft(rest)
        was_paused = self.buffered > _HIGH_WATER
        self.buffered -= len(chunk)
        if was_paused and self.buffered <= _HIGH_WATER and self.transport is not None and not self.at_eof:
            self.transport.resume_reading()
        return chunk

    def reader(self) -> asyncio.Future[None]:
        self._reader = asyncio.get_running_loop().create_future()
        return self._reader

    def writable(self) -> asyncio.Future[None] | None:
        return self._writable

    def _wake_reader(self) -> None:
        if self._reader is not None:
            if not self._reader.done():
                self._reader.set_result(None)
            self._reader = None


async def _within(future: asyncio.Future[None], timeout: float | None, error: type[Exception]) -> None:
    """Wait for ``future``; ``error`` if ``timeout`` seconds pass first (None: wait as long as it takes)."""
    if timeout is None:
        await future
        return

    def expire() -> None:
        if not future.done():
            future.set_exception(error(f"timed out after {timeout:g}s"))

    timer = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        await future
    finally:
        timer.cancel()


class _AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, protocol: _BufferingProtocol) -> None:
        self._protocol = protocol

    @property
    def _transport(self) -> asyncio.Transport:
        assert self._protocol.transport is not None
        return self._protocol.transport

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        while not protocol.chunks:
            if protocol.error is not None:
                raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
            if protocol.at_eof:
                return b""  # httpcore's sign that the peer closed
            await _within(protocol.reader(), timeout, httpcore.ReadTimeout)
        return protocol.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        transport = self._transport
        if transport.is_closing():
            raise httpcore.WriteError(str(self._protocol.error or "the connection is closed"))
        transport.write(buffer)
        writable = self._protocol.writable()
        if writable is not None:  # the kernel's buffer is full: wait for it to drain, as anyio does
            await _within(writable, timeout, httpcore.WriteTimeout)

    async def aclose(self) -> None:
        transport = self._protocol.transport
        if transport is not None:
            transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(self._transport, self._protocol, ssl_context, server_hostname=server_hostname,
                                       ssl_handshake_timeout=timeout)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(str(exc) or "TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        if tls is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = typing.cast(asyncio.Transport, tls)
        return self

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":  # what httpcore asks of an idle kept-alive connection: closed, or sent something
            return bool(self._protocol.chunks) or self._protocol.at_eof
        transport = self._protocol.transport
        if transport is None:
            return None
        if info == "client_addr":
            return transport.get_extra_info("sockname")
        if info == "server_addr":
            return transport.get_extra_info("peername")
        return transport.get_extra_info(info)  # "ssl_object", "socket"


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on asyncio transports (TCP, Unix sockets, TLS)."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        return await self._connect(lambda protocol: loop.create_connection(lambda: protocol, host, port, local_addr=local),
                                   timeout, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        return await self._connect(lambda protocol: loop.create_unix_connection(lambda: protocol, path),
                                   timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    @staticmethod
    async def _connect(connect: typing.Callable[[_BufferingProtocol], typing.Awaitable[object]], timeout: float | None,
                       socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None) -> httpcore.AsyncNetworkStream:
        protocol = _BufferingProtocol()
        try:
            async with asyncio.timeout(timeout):
                await connect(protocol)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"no connection within {timeout:g}s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        sock = protocol.transport.get_extra_info("socket") if protocol.transport else None
        if sock is not None:
            for option in socket_options or ():
                sock.setsockopt(*option)
        return _AsyncioStream(protocol)
