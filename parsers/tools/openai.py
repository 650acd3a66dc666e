"""gpt-oss harmony channel protocol: reasoning, answer and tool calls in one stream.

The prompt ends with ``<|start|>assistant``, so the output is a sequence of messages::

    <|channel|>analysis<|message|>thinking...<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"X"}<|call|>
    <|start|>assistant<|channel|>final<|message|>answer<|return|>

``analysis`` is reasoning, ``final`` (and ``commentary`` without a recipient, a
preamble) is content, and a message with a ``to=`` recipient is a tool call, wherever the
recipient sits in the header (role part or after the channel, even on ``analysis``).
JSON bodies stream as compact argument deltas; an empty body is ``{}``; a body that is
not a JSON object is content.  ``<|call|>``/``<|return|>`` may be present or stripped.
Registered both as the ``openai`` tool parser and the ``openai_gptoss`` reasoning parser;
with only the latter, recipient messages are content.
"""

from __future__ import annotations

import logging
import re

from ..base import ParseEvent, RawCall
from ..block import find_first, partial_suffix_len
from ..jsonstream import JsonReader, JsonSyntaxError
from ..schema import lenient_literal
from ..sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["GptOssReasoningParser", "OpenAIToolParser"]

_START, _MESSAGE = "<|start|>", "<|message|>"
_CHANNEL_TOKEN = "<|channel|>"
# A message ends at an end token, or where the next one visibly begins (stripped ends).
_TERMINATORS = ("<|end|>", "<|return|>", "<|call|>", _START, _CHANNEL_TOKEN)
_HEADER_OPENERS = (_START, "<|channel|>", "assistant", "to=", " to=")

_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([A-Za-z_]+)")
_MAX_HEADER = 1024


class OpenAIToolParser:
    """Whole-stream parser for harmony output (implements ``OutputParser``)."""

    whole_stream = True

    def __init__(self, sink: EventSink, *, parse_tools: bool = True) -> None:
        """Create the parser.

        Args:
            sink: Event sink for this request.
            parse_tools: Turn recipient messages into tool calls (else content).
        """
        self._sink, self._tools_on = sink, parse_tools
        self._buf = ""
        self._state = "header"
        self._kind = "content"
        self._name = ""
        self._raw = ""
        self._reader: JsonReader | None = None
        self._body: list[str] = []  # the call message's raw body, for the failure path
        self._sniffed = False

    @property
    def truncated_call(self) -> bool:
        """True if ``finish()`` turned an incomplete call into content."""
        return self._sink.truncated_call

    def feed(self, text: str) -> list[ParseEvent]:
        """Consume a chunk of output; return the events it completes."""
        self.push(text)
        return self._sink.drain()

    def finish(self) -> list[ParseEvent]:
        """End of output: flush text, complete or return an open call."""
        self.close()
        return self._sink.drain()

    def push(self, text: str) -> None:
        """Consume a chunk, leaving the events in the sink (for a host stream)."""
        self._buf += text
        self._run(eof=False)

    def close(self) -> None:
        """End of output, leaving the events in the sink."""
        self._run(eof=True)
        if self._state == "body" and self._kind == "call":
            self._end_call(eof=True)
        elif self._buf:
            self._text(self._buf)
        self._buf = ""
        self._sink.abandon()

    def _run(self, eof: bool) -> None:
        while self._buf:
            if self._state == "header":
                if not self._header(eof):
                    return
            elif self._kind == "call":
                if not self._call_body(eof):
                    return
            elif not self._text_body(eof):
                return

    # -- headers -------------------------------------------------------------------------

    def _header(self, eof: bool) -> bool:
        head = self._buf.lstrip()
        if not head:
            return False
        if not head.startswith(_HEADER_OPENERS):
            if not eof and any(o.startswith(head) for o in _HEADER_OPENERS):
                return False
            self._begin("content", "")  # plain text outside the protocol
            return True
        idx = self._buf.find(_MESSAGE)
        if idx < 0:
            if eof or len(self._buf) > _MAX_HEADER:
                self._not_a_header()
                return bool(self._buf)
            return False
        header, self._buf = self._buf[:idx], self._buf[idx + len(_MESSAGE) :]
        recipient = _RECIPIENT.search(header)
        channel = _CHANNEL.search(header)
        if recipient and self._tools_on:
            self._begin("call", header + _MESSAGE, recipient.group(1).removeprefix("functions."))
        elif channel and channel.group(1) == "analysis":
            self._begin("reasoning", "")
        else:
            self._begin("content", "")
        return True

    def _not_a_header(self) -> None:
        """A header that never reaches ``<|message|>``: content up to the next opener."""
        nxt, _ = find_first(self._buf, (_START, _CHANNEL_TOKEN), 1)
        cut = nxt if nxt > 0 else len(self._buf)
        self._sink.content(self._buf[:cut])
        self._buf = self._buf[cut:]

    def _begin(self, kind: str, raw: str, name: str = "") -> None:
        self._state, self._kind, self._raw, self._name = "body", kind, raw, name
        self._reader, self._body, self._sniffed = None, [], False

    # -- text bodies -----------------------------------------------------------------------

    def _text(self, text: str) -> None:
        if self._kind == "reasoning":
            self._sink.reasoning(text)
        else:
            self._sink.content(text)

    def _text_body(self, eof: bool) -> bool:
        idx, term = find_first(self._buf, _TERMINATORS)
        if idx < 0:
            keep = 0 if eof else partial_suffix_len(self._buf, _TERMINATORS)
            self._text(self._buf[: len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep :]
            return False
        self._text(self._buf[:idx])
        self._buf = self._buf[idx + (0 if term == _CHANNEL_TOKEN else len(term)) :]
        self._state = "header"
        return True

    # -- call bodies ------------------------------------------------------------------------

    def _call_body(self, eof: bool) -> bool:
        if self._reader is None and not self._sniffed:
            stripped = self._buf.lstrip()
            self._sniffed = bool(stripped)  # the first visible character decides JSON or not
            if stripped.startswith("{"):
                self._reader = JsonReader()
                self._sink.start(self._name)
        if self._reader is not None and not self._reader.done:
            try:
                used = self._reader.feed(self._buf)
            except JsonSyntaxError as exc:
                logger.debug("harmony call body is not JSON (%s); keeping it as content", exc)
                self._sink.abandon()
                self._reader = None
                self._kind = "content"
                self._text(self._raw + "".join(self._body))
                return True
            self._sink.args(self._reader.take())
            self._body.append(self._buf[:used])
            self._buf = self._buf[used:]
            if not self._reader.done:
                return False
            self._sink.end(self._reader.value if isinstance(self._reader.value, dict) else {})
        idx, term = find_first(self._buf, _TERMINATORS)
        if idx < 0:
            keep = 0 if eof else partial_suffix_len(self._buf, _TERMINATORS)
            self._body.append(self._buf[: len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep :]
            return False
        self._body.append(self._buf[:idx])
        self._buf = self._buf[idx + (0 if term == _CHANNEL_TOKEN else len(term)) :]
        self._end_call(eof=False)
        return True

    def _end_call(self, eof: bool) -> None:
        """The call message ended (or the output did): emit it, or return it as content."""
        self._state = "header"
        if self._reader is not None:
            if not self._reader.done and not self._reader.finish():
                self._fail(truncated=eof)
            return
        body = "".join(self._body).strip()
        if not body and not eof:
            self._sink.call(RawCall(self._name, {}))
            return
        try:
            value = lenient_literal(body) if body else None
        except ValueError:
            value = None
        if isinstance(value, dict):
            self._sink.call(RawCall(self._name, value))
        else:
            self._fail(truncated=eof)

    def _fail(self, *, truncated: bool) -> None:
        self._sink.abandon()
        self._sink.content(self._raw + "".join(self._body) + (self._buf if truncated else ""))
        if truncated:
            self._buf = ""
            self._sink.truncated_call = True


GptOssReasoningParser = OpenAIToolParser
"""The ``openai_gptoss`` reasoning parser is the same whole-stream harmony parser."""
