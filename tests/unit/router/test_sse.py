"""The stream boundary: whatever raises while frames are produced, the stream ends with its
API's terminal error event; a stream the client leaves is closed at once, down to its source."""

from __future__ import annotations

import asyncio
import json

import pytest

from engines.errors import EngineRequestError
from router.errors import error_body
from router.sse import _ended_by_an_event


def openai_error(error) -> bytes:
    return b"data: " + json.dumps(error_body(error)).encode() + b"\n\n"


async def frames_then(exc: BaseException):
    yield b"data: 1\n\n"
    raise exc


async def collect(frames) -> list[bytes]:
    return [frame async for frame in _ended_by_an_event(frames, openai_error)]


@pytest.mark.parametrize(
    ("exc", "status_type"),
    [
        (ValueError("a bug of ours"), "server_error"),  # not a router or engine error: still an error event
        (OverflowError("int too large to convert"), "server_error"),
        (EngineRequestError("the engine failed while generating this request"), "server_error"),
        (EngineRequestError("the prompt is empty", invalid=True), "invalid_request_error"),
        # One of a multi-prompt completion's concurrent generations failing: a TaskGroup's group.
        (ExceptionGroup("generations", [EngineRequestError("the prompt is empty", invalid=True)]), "invalid_request_error"),
    ],
)
def test_any_exception_ends_the_stream_with_an_error_frame(exc, status_type):
    frames = asyncio.run(collect(frames_then(exc)))
    assert frames[0] == b"data: 1\n\n" and len(frames) == 2
    error = json.loads(frames[1][6:])["error"]
    assert error["type"] == status_type and error["message"]
    assert "a bug of ours" not in error["message"]  # unexpected exceptions are logged, not shown


def test_leaving_the_stream_closes_its_source_at_once():
    closed = []

    async def source():
        try:
            for i in range(100):
                yield f"data: {i}\n\n".encode()
        finally:
            closed.append(True)  # where Generation.stream aborts the request in the worker

    async def read_two():
        stream = _ended_by_an_event(source(), openai_error)
        assert [await anext(stream), await anext(stream)] == [b"data: 0\n\n", b"data: 1\n\n"]
        await stream.aclose()
        return closed

    assert asyncio.run(read_two()) == [True]


def test_text_that_splitlines_takes_for_line_ends_is_escaped_in_frames():
    """U+0085, U+2028 and U+2029 are valid raw in JSON, but a client splitting the stream with
    str.splitlines() (httpx's iter_lines) would cut the frame there; escaped, the text survives."""
    from router.sse import data_frame, event_frame

    text = "a\u0085b\u2028c\u2029d é 日本 \U0001F600"
    for frame in (data_frame({"content": text}), event_frame("delta", {"content": text})):
        (data,) = [line for line in frame.decode().splitlines() if line.startswith("data: ")]
        assert json.loads(data[len("data: "):]) == {"content": text}
