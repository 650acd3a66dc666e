"""The upstream client's asyncio network backend, under httpx for real, against loopback servers.

Each test is a way a connection can go: TLS (a certificate from trustme, verified), a Unix socket,
a body larger than the read buffer's high-water mark both ways, an upstream that never answers
(read timeout), one that closes its kept-alive connection between requests, a refused connection,
and a request whose task is cancelled while it waits.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable

import httpx
import pytest
import trustme

from router.upstream.asyncio_streams import AsyncioBackend
from router.upstream.held_writes import held_writes_transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _client(**kwargs) -> httpx.AsyncClient:
    transport_options = {key: kwargs.pop(key) for key in ("verify", "uds") if key in kwargs}
    return httpx.AsyncClient(transport=held_writes_transport(network_backend=AsyncioBackend(), **transport_options), **kwargs)


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's body (Content-Length bodies only); None when the client closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.decode().split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return await reader.readexactly(length)


def _answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


def _echo(*, close_after_each: bool = False) -> Handler:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (body := await _read_request(reader)) is not None:
            writer.write(_answer(body or b"hello"))
            await writer.drain()
            if close_after_each:  # without "Connection: close": the client finds out from the socket
                break
        writer.close()

    return serve


def test_tls_to_a_verified_certificate():
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)

    async def run() -> tuple[bytes, str | None]:
        server = await asyncio.start_server(_echo(), "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        async with server, _client(verify=client_context) as client:
            response = await client.post(f"https://localhost:{port}/v1/echo", content=b"over tls")
            ssl_object = response.extensions["network_stream"].get_extra_info("ssl_object")
            return response.content, ssl_object.version() if ssl_object else None

    body, version = asyncio.run(run())
    assert body == b"over tls"
    assert version is not None and version.startswith("TLS")


def test_tls_to_an_unknown_certificate_is_a_connect_error():
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server_context)

    async def run() -> None:
        server = await asyncio.start_server(_echo(), "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        async with server, _client(verify=ssl.create_default_context()) as client:
            await client.get(f"https://localhost:{port}/")

    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(run())


def test_unix_socket(tmp_path):
    path = str(tmp_path / "upstream.sock")

    async def run() -> bytes:
        server = await asyncio.start_unix_server(_echo(), path)
        async with server, _client(uds=path) as client:
            return (await client.post("http://upstream/v1/echo", content=b"over a unix socket")).content

    assert asyncio.run(run()) == b"over a unix socket"


def test_bodies_past_the_high_water_mark_arrive_whole_both_ways():
    body = bytes(range(256)) * (6 * 1024 * 4)  # 6 MiB, many times the read buffer's high-water mark

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received = await _read_request(reader)  # the client's writes wait on the kernel's buffer meanwhile
        assert received is not None
        writer.write(_answer(received))
        await writer.drain()
        writer.close()

    async def run() -> bytes:
        server = await asyncio.start_server(slow_echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, _client() as client:
            async with client.stream("POST", f"http://127.0.0.1:{port}/echo", content=body) as response:
                chunks = []
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
                    await asyncio.sleep(0)  # a reader slower than the socket: the buffer fills and pauses
                return b"".join(chunks)

    assert asyncio.run(run()) == body


def test_an_upstream_that_never_answers_is_a_read_timeout():
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(30)

    async def run() -> None:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with _client(timeout=httpx.Timeout(5.0, read=0.2)) as client:
            try:
                await client.get(f"http://127.0.0.1:{port}/")
            finally:
                server.close()

    with pytest.raises(httpx.ReadTimeout):
        asyncio.run(run())


def test_a_kept_alive_connection_the_upstream_closed_is_replaced():
    connections = []

    async def count(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await _echo(close_after_each=True)(reader, writer)

    async def run() -> list[bytes]:
        server = await asyncio.start_server(count, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, _client() as client:
            answers = []
            for turn in range(3):
                answers.append((await client.post(f"http://127.0.0.1:{port}/", content=b"turn %d" % turn)).content)
                await asyncio.sleep(0.05)  # the server's close arrives while the connection sits in the pool
            return answers

    assert asyncio.run(run()) == [b"turn 0", b"turn 1", b"turn 2"]
    assert len(connections) == 3


def test_a_refused_connection_is_a_connect_error():
    async def run() -> None:
        server = await asyncio.start_server(_echo(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        async with _client() as client:
            await client.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(run())


def test_a_request_cancelled_while_it_waits_is_cancelled_not_timed_out():
    answered = asyncio.Event()
    loop_errors: list[dict] = []

    async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await answered.wait()

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
        server = await asyncio.start_server(late, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with _client(timeout=httpx.Timeout(5.0, read=0.3)) as client:
            request = asyncio.create_task(client.get(f"http://127.0.0.1:{port}/"))
            await asyncio.sleep(0.1)
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request
            await asyncio.sleep(0.4)  # past the read timeout
            answered.set()
        server.close()

    asyncio.run(run())
    assert loop_errors == []


def test_an_unread_stream_stops_reading_at_the_high_water_mark_and_resumes():
    body = bytes(range(256)) * (4 * 1024 * 4)  # 4 MiB

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(body)
        await writer.drain()
        writer.close()

    async def run() -> tuple[int, bool, bytes]:
        server = await asyncio.start_server(flood, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            stream = await AsyncioBackend().connect_tcp("127.0.0.1", port)
            await asyncio.sleep(0.3)  # nothing read meanwhile
            protocol = stream._protocol  # what the transport holds for a reader that does not read
            held, reading = protocol.buffered, protocol.transport.is_reading()
            chunks = []
            while chunk := await stream.read(65536, timeout=5):
                chunks.append(chunk)
            await stream.aclose()
        return held, reading, b"".join(chunks)

    held, reading, received = asyncio.run(run())
    assert not reading
    assert held < len(body) // 4  # paused near the mark, not the whole body in memory
    assert received == body
