"""A request's head and body to an upstream in one socket write.

httpcore writes a request as it serializes it: the head, then each body chunk. On loopback or a LAN
each write is a segment the upstream's server wakes up for, and uvicorn starts the request's task on
the head alone, so a proxied request cost the upstream (and, on a machine whose cores are shared, the
front too) one more wake-up and context switch before it could start; in `bench hop` one write took
about 0.1 ms off the hop (docs/benchmarks.md). Here writes are held until the connection next reads,
which httpcore does for the response right after the request is written, and go out then, together.
A held request is never larger than the body the front already holds in memory.
"""

from __future__ import annotations

import ssl
import typing

import httpcore
import httpx

__all__ = ["held_writes_transport"]


class _HeldWritesStream(httpcore.AsyncNetworkStream):
    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._held: list[bytes] = []
        self._timeout: float | None = None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._held.append(buffer)
            self._timeout = timeout

    async def _flush(self) -> None:
        if self._held:
            data, self._held = b"".join(self._held), []
            await self._stream.write(data, timeout=self._timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush()
        return await self._stream.read(max_bytes, timeout=timeout)

    async def aclose(self) -> None:
        self._held = []  # a request abandoned before its response was read: nothing to send
        await self._stream.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        await self._flush()
        return _HeldWritesStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _HeldWritesBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.AsyncNetworkStream:
        return _HeldWritesStream(await self._backend.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.AsyncNetworkStream:
        return _HeldWritesStream(await self._backend.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def held_writes_transport(*, network_backend: httpcore.AsyncNetworkBackend | None = None,
                          **kwargs: typing.Any) -> httpx.AsyncHTTPTransport:
    """``httpx.AsyncHTTPTransport(**kwargs)`` whose connections write each request at once.

    ``network_backend``: what connects the sockets (default: httpcore's, as the transport's own).
    httpx takes no network backend, so it is set on the transport's httpcore pool; a test
    (tests/unit/router/test_held_writes.py) fails if an httpx release moves it.
    """
    transport = httpx.AsyncHTTPTransport(**kwargs)
    pool = transport._pool
    pool._network_backend = _HeldWritesBackend(network_backend or pool._network_backend)
    return transport
