"""Llama 3.1/3.2/3.3 JSON calls: ``{"name": ..., "parameters": {...}}`` with no wrapper.

The call is usually the message itself, optionally after ``<|python_tag|>``; several
calls are joined with ``;`` or newlines (unofficial but common).  A JSON object only
counts when it has both a name and ``parameters``/``arguments``, so JSON quoted in prose
stays prose.  When tools were sent, such an object also counts inside prose (vLLM's
``llama3_json`` takes every ``{`` of the output as a possible call); the prose around it
stays content.  Built-in tools after ``<|python_tag|>`` (``brave_search.call(query=
"...")``) become calls named after the tool, raw code after it is content; Meta's
``<function=N>{json}</function>`` form is accepted too.  Calls end at ``<|eom_id|>``/
``<|eot_id|>`` or the end of output.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..base import NotACallError
from ..block import NEED_MORE, Block, SniffBlock
from ..jsonblock import JsonBlock
from ..jsoncall import CallKeys, CallListReader
from ..jsonstream import JsonReader, JsonSyntaxError
from .hermes import HermesToolParser
from .pythonic import PyListReader

if TYPE_CHECKING:
    from ..sink import EventSink

__all__ = ["Llama3JsonToolParser"]

_KEYS = CallKeys(require_args=True)
_BUILTIN = re.compile(r"[A-Za-z_]\w*\.call\s*\(")
_TURN_ENDS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>")


class Llama3JsonToolParser(HermesToolParser):
    """Bare JSON calls, ``;``-separated, ``<|python_tag|>`` optional; inside prose too when tools were sent."""

    start_markers = ("<|python_tag|>", "<function=", "{")
    end_markers = ()
    drop_markers = _TURN_ENDS
    call_separators = ";"
    bare_calls = False

    def _calls_block(self) -> JsonBlock:
        return JsonBlock(CallListReader(self.sink, _KEYS, array=True, sequence=";"))

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        if text[0] == "[":  # a list of calls, as after <|python_tag|>
            rest = text[1:].lstrip()
            if not rest:
                return None if eof else NEED_MORE
            return self._calls_block() if rest[0] == "{" else None
        return self._calls_block() if text[0] == "{" else None

    def open_block(self, marker: str) -> Block | None:
        if marker == "{":
            # Only a request with tools is parsed for calls at all (as in vLLM).
            return _InlineCallBlock(self.sink) if self.tools.names else None
        if marker == "<function=":
            return SniffBlock(self._choose_function_body)
        return SniffBlock(self._choose_python_tag_body)

    def _choose_python_tag_body(self, text: str, eof: bool):
        body = text.lstrip()
        if not body:
            return None if eof else NEED_MORE
        if body[0] in "{[":
            return self._calls_block()
        if _BUILTIN.match(body):
            return JsonBlock(PyListReader(self.sink, bracketed=False, builtin=True), end_markers=_TURN_ENDS)
        if not eof and re.fullmatch(r"[A-Za-z_][\w.]*\s*", body) and len(body) < 64:
            return NEED_MORE
        return _DropMarker()  # code for the code interpreter: plain content, without the tag


class _InlineCallBlock(Block):
    """A JSON object met inside prose (its ``{`` was the marker).

    Invalid JSON goes back to content from the brace on; a complete object that is no
    call is content as a whole, so the objects nested in it are never taken for calls.
    """

    def __init__(self, sink: EventSink) -> None:
        self._extent = JsonReader()  # where the object ends, whatever it holds
        self._extent.feed("{")
        self._reader = CallListReader(sink, _KEYS, array=False)
        self._reader.feed("{")

    @property
    def committed(self) -> int:  # type: ignore[override]
        return self._reader.committed

    def feed(self, text: str) -> int | None:
        try:
            used = self._extent.feed(text)
        except JsonSyntaxError as exc:
            raise NotACallError(str(exc)) from None
        try:
            self._reader.feed(text[:used])
        except NotACallError:
            if not self._extent.done:
                raise
            self.malformed = True
        return used if self._extent.done else None

    def close(self) -> bool:
        if self._reader.started:
            return False  # a call cut off by the end of output
        raise NotACallError("an unfinished JSON object in prose")


class _DropMarker(Block):
    """Consumes nothing: the marker before it is dropped and its text scanned as content."""

    def feed(self, text: str) -> int | None:
        return 0

    def close(self) -> bool:
        return True
