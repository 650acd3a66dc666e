"""The model name in an upstream's replies, rewritten to the name the client asked for, bytes kept.

Only the value of a `"model"` key is replaced, so a stream passes through byte for byte apart from
that name. Every API carries the name at the top of a body or chunk (chat, completions, non-stream
bodies), or one level down: a Responses event's `response`, Anthropic's `message_start` `message`.
The first `"model": "<that value>"` in the text is the one replaced: tool arguments travel as JSON
strings (their quotes escaped, so they cannot match), and every API writes `model` before content.
"""

from __future__ import annotations

import json
import re

__all__ = ["SseFrames", "rewrite_model"]

_NESTED = ("response", "message")


def _reported_model(document: object) -> str | None:
    """The model name a reply body or event carries, where the APIs put it."""
    if not isinstance(document, dict):
        return None
    model = document.get("model")
    if isinstance(model, str):
        return model
    for key in _NESTED:
        inner = document.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("model"), str):
            return inner["model"]
    return None


def rewrite_model(payload: bytes, client_name: str) -> bytes:
    """``payload`` (one JSON document) with its reported model name replaced by ``client_name``.

    Anything that is not JSON, or carries no model name, is returned unchanged.
    """
    if b'"model"' not in payload:
        return payload
    try:
        reported = _reported_model(json.loads(payload))
    except ValueError:
        return payload
    if reported is None or reported == client_name:
        return payload
    pattern = rb'("model"\s*:\s*)' + re.escape(json.dumps(reported).encode())
    replacement = json.dumps(client_name).encode().replace(b"\\", b"\\\\")
    return re.sub(pattern, rb"\g<1>" + replacement, payload, count=1)


def _rewrite_event(event: bytes, client_name: str) -> bytes:
    """One SSE event: its ``data:`` line rewritten (the APIs send one data line per event)."""
    if b'"model"' not in event:
        return event
    lines = event.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"data:"):
            head = b"data: " if line.startswith(b"data: ") else b"data:"
            body, cr = (line[len(head):-1], b"\r") if line.endswith(b"\r") else (line[len(head):], b"")
            lines[index] = head + rewrite_model(body, client_name) + cr
    return b"\n".join(lines)


class SseFrames:
    """Cuts an upstream's byte stream into whole SSE events (a blank line ends one), rewriting each.

    ``feed`` returns the events completed by a chunk, separators included; ``rest`` what is left
    when the stream ends (an unterminated last event, passed on as it is).
    """

    def __init__(self, client_name: str) -> None:
        self._client_name = client_name
        self._buffer = b""

    def feed(self, chunk: bytes) -> bytes:
        self._buffer += chunk
        out = []
        while True:
            end = _event_end(self._buffer)
            if end is None:
                break
            stop, separator = end
            out.append(_rewrite_event(self._buffer[:stop], self._client_name) + self._buffer[stop:stop + separator])
            self._buffer = self._buffer[stop + separator:]
        return b"".join(out)

    def rest(self) -> bytes:
        rest, self._buffer = self._buffer, b""
        return rest


def _event_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first event ends and how long its separator is (LF LF or CRLF CRLF), if it has ended."""
    found = [(index, len(sep)) for sep in (b"\n\n", b"\r\n\r\n") if (index := buffer.find(sep)) >= 0]
    return min(found) if found else None
