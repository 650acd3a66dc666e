"""Server-sent events: framing and the streaming response every API uses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from litestar.response import Stream

# Never compress or buffer SSE: agents read frames as they are flushed. The content type is a
# header, not Stream's media_type: Litestar lets the route's default (JSON) override that one.
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    "Connection": "keep-alive",
}

_encode = msgspec.json.Encoder().encode


def data_frame(payload: object) -> bytes:
    """A ``data:`` frame (OpenAI chat/completions dialect)."""
    return b"data: " + _encode(payload) + b"\n\n"


def event_frame(event: str, payload: object) -> bytes:
    """An ``event:`` + ``data:`` frame (Anthropic and Responses dialects)."""
    return b"event: " + event.encode() + b"\ndata: " + _encode(payload) + b"\n\n"


DONE_FRAME = b"data: [DONE]\n\n"


def sse_response(frames: AsyncIterator[bytes]) -> Stream:
    return Stream(frames, media_type="text/event-stream", headers=SSE_HEADERS)


# An SSE comment: every client's parser skips it, and it keeps the connection visibly alive.
COMMENT_KEEPALIVE = b": keepalive\n\n"
