"""An upstream request leaves in one socket write: httpx and httpcore for real, a loopback HTTP server.

The count is taken under the held writes, at the socket streams httpcore's own backend connects.
"""

from __future__ import annotations

import asyncio
import json

import httpcore
import httpx

from router.upstream.held_writes import held_writes_transport


class CountingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own backend, recording the size of every write that reaches a socket."""

    def __init__(self) -> None:
        self._backend = httpcore.AnyIOBackend()
        self.writes: list[int] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _CountingStream(await self._backend.connect_tcp(host, port, timeout, local_address, socket_options), self.writes)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _CountingStream(await self._backend.connect_unix_socket(path, timeout, socket_options), self.writes)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _CountingStream(httpcore.AsyncNetworkStream):
    def __init__(self, stream: httpcore.AsyncNetworkStream, writes: list[int]) -> None:
        self._stream, self._writes = stream, writes

    async def read(self, max_bytes, timeout=None):
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer, timeout=None):
        self._writes.append(len(buffer))
        await self._stream.write(buffer, timeout)

    async def aclose(self):
        await self._stream.aclose()

    def get_extra_info(self, info):
        return self._stream.get_extra_info(info)


async def _echo_server() -> tuple[asyncio.Server, int, list[bytes]]:
    """A keep-alive HTTP/1.1 server that answers each request with the body it got (Content-Length or chunked)."""
    bodies: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break  # the client closed its kept-alive connection between requests
            headers = {name.lower(): value for name, value in
                       (line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line)}
            if "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            else:
                body = b""
                while (size := int((await reader.readline()).strip(), 16)) > 0:
                    body += await reader.readexactly(size)
                    await reader.readline()
                await reader.readline()
            bodies.append(body)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], bodies


def test_each_request_goes_out_in_one_write_and_arrives_whole():
    async def run() -> tuple[list[int], list[bytes], list[dict]]:
        server, port, bodies = await _echo_server()
        backend = CountingBackend()
        async with server, httpx.AsyncClient(transport=held_writes_transport(network_backend=backend)) as client:
            answers = []
            for turn in range(3):  # one kept-alive connection: each request's head and body together
                body = {"model": "coder", "messages": [{"role": "user", "content": "x" * 5000}], "turn": turn}
                response = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body)
                answers.append(response.json())
        return backend.writes, bodies, answers

    writes, bodies, answers = asyncio.run(run())
    assert len(writes) == 3, f"writes per request should be 1, got sizes {writes}"
    assert [answer["turn"] for answer in answers] == [0, 1, 2]
    assert all(json.loads(body)["messages"][0]["content"] == "x" * 5000 for body in bodies)
    assert all(size > 5000 for size in writes)  # head and body in the same write


def test_a_streamed_request_body_is_held_until_the_response_is_read():
    async def chunks():
        for part in (b'{"a": ', b'"streamed"', b"}"):
            yield part

    async def run() -> tuple[list[int], bytes]:
        server, port, _ = await _echo_server()
        backend = CountingBackend()
        async with server, httpx.AsyncClient(transport=held_writes_transport(network_backend=backend)) as client:
            response = await client.post(f"http://127.0.0.1:{port}/echo", content=chunks())
        return backend.writes, response.content

    writes, echoed = asyncio.run(run())
    assert echoed == b'{"a": "streamed"}'
    assert len(writes) == 1
