"""The upstream client's sockets: a request's head and body reach the upstream in one send.

A real loopback server answers; between the coalescing stream and the socket, a recording stream
counts the sends the client makes (the server cannot tell: it may read two sends as one chunk).
"""

from __future__ import annotations

import asyncio
import socket

import httpcore
import httpx

from router.upstream.network import FLUSH_AT_BYTES, CoalescingBackend, upstream_transport

REPLY = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class Upstream(asyncio.Protocol):
    """Answers each request once its body is in."""

    def __init__(self) -> None:
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, sep, body = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        if len(body) >= length:
            self.buffer = body[length:]
            self.transport.write(REPLY)


class RecordingStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream, sends: list[bytes]) -> None:
        self.inner, self.sends = inner, sends

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.sends.append(buffer)
        await self.inner.write(buffer, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def get_extra_info(self, info: str):
        return self.inner.get_extra_info(info)


class RecordingBackend(httpcore.AnyIOBackend):
    def __init__(self, sends: list[bytes]) -> None:
        self.sends = sends

    async def connect_tcp(self, *args, **kwargs) -> httpcore.AsyncNetworkStream:
        return RecordingStream(await super().connect_tcp(*args, **kwargs), self.sends)


async def serve(client_requests) -> None:
    server = await asyncio.get_running_loop().create_server(Upstream, "127.0.0.1", 0)
    async with server:
        await client_requests(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions")


def sends_of(bodies: list[bytes], *, coalesce: bool = True, piece: int | None = None) -> list[bytes]:
    """POST each body in turn on one kept-alive connection (streamed in ``piece``-byte parts when
    given); what went to the socket, send by send."""
    sends: list[bytes] = []
    backend = CoalescingBackend(RecordingBackend(sends)) if coalesce else RecordingBackend(sends)

    async def requests(url: str) -> None:
        async with httpcore.AsyncConnectionPool(network_backend=backend) as pool:
            for body in bodies:
                content = body if piece is None else pieces(body, piece)
                response = await pool.request("POST", url, content=content, headers={"content-length": str(len(body))})
                assert response.status == 200 and response.content == b"{}"

    asyncio.run(serve(requests))
    return sends


async def pieces(body: bytes, size: int):
    for start in range(0, len(body), size):
        yield body[start:start + size]


def test_each_request_goes_out_as_one_send_head_and_body_together():
    bodies = [b'{"model": "coder", "messages": []}', b'{"model": "coder", "n": 2}']
    assert len(sends_of(bodies, coalesce=False)) >= 4  # httpcore alone: head, then body, per request
    sends = sends_of(bodies)
    assert len(sends) == 2
    for send, body in zip(sends, bodies):
        assert send.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and send.endswith(b"\r\n\r\n" + body)


def test_a_large_streamed_body_goes_out_in_pieces_whole_and_in_order():
    body = b'{"text": "' + bytes(range(97, 123)) * (FLUSH_AT_BYTES // 8) + b'"}'
    sends = sends_of([body], piece=8192)
    assert len(sends) >= 2 and all(len(send) >= FLUSH_AT_BYTES for send in sends[:-1])
    assert b"".join(sends).endswith(b"\r\n\r\n" + body)


def test_the_upstream_transport_serves_requests_through_httpx():
    async def requests(url: str) -> None:
        transport = upstream_transport(httpx.Limits(max_connections=2, max_keepalive_connections=1),
                                       [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            for _ in range(3):
                response = await client.post(url, content=b'{"model": "coder"}')
                assert response.status_code == 200 and response.json() == {}
            assert isinstance(transport._pool._network_backend, CoalescingBackend)

    asyncio.run(serve(requests))
