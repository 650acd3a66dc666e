"""``bench canned-upstream``: an upstream that answers at once, so ``bench hop`` measures the front alone.

Against a real rapid-mlx upstream on one small machine, the hop ``bench hop`` measures mixes the
proxy's work with whatever the upstream's router and worker do on the same cores. This server
answers every streamed chat request with the same three frames as soon as the request is in (and
``GET /v1/models`` for health checks), on plain asyncio with no framework, so what a front adds
over it is the front's own cost. ``gap_ms`` puts a wait
between the role frame and the token, as a model's prefill does: the front then relays the two
frames in separate turns, the shape of a real stream, instead of often reading both at once.

    rapid-mlx bench canned-upstream --port 8301 [--gap-ms 15]
    rapid-mlx bench hop --direct http://127.0.0.1:8301 --front http://127.0.0.1:8300 --model coder
"""

from __future__ import annotations

import asyncio
import functools
import json

__all__ = ["CANNED_MODEL", "serve_canned_upstream"]

CANNED_MODEL = "coder"


def _frame(delta: dict, finish_reason: str | None = None) -> bytes:
    chunk = {"id": "chatcmpl-canned", "object": "chat.completion.chunk", "created": 0, "model": CANNED_MODEL,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


# Sent as two chunks, as a server streaming a reply does: the role frame, then a token and the end.
_FIRST = _frame({"role": "assistant", "content": ""})
_REST = _frame({"content": "hi"}) + _frame({}, "length") + b"data: [DONE]\n\n"
_MODELS = json.dumps({"object": "list", "data": [{"id": CANNED_MODEL, "object": "model", "created": 0,
                                                  "owned_by": "rapid-mlx"}]}).encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gap_s: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            length = next((int(line.split(":", 1)[1]) for line in header_lines
                           if line.lower().startswith("content-length:")), 0)
            if length:
                await reader.readexactly(length)
            if request_line.startswith("GET "):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(_MODELS), _MODELS))
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                             + _chunk(_FIRST))
                await writer.drain()
                if gap_s:
                    await asyncio.sleep(gap_s)
                writer.write(_chunk(_REST) + b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client closed its kept-alive connection: this one is done
    finally:
        writer.close()


async def serve_canned_upstream(host: str, port: int, *, gap_ms: float = 0.0) -> None:
    """Serve until cancelled."""
    server = await asyncio.start_server(functools.partial(_serve_connection, gap_s=gap_ms / 1000), host, port)
    async with server:
        await server.serve_forever()
