"""Llama 3.1/3.2/3.3 JSON calls: ``{"name": ..., "parameters": {...}}`` with no wrapper.

The call is the message itself, optionally after ``<|python_tag|>``; several calls are
joined with ``;`` or newlines (unofficial but common).  A JSON object only counts when
it has both a name and ``parameters``/``arguments`` at call position, so JSON quoted in
prose stays prose.  Built-in tools after ``<|python_tag|>`` (``brave_search.call(query=
"...")``) become calls named after the tool, raw code after it is content; Meta's ``<function=N>{json}</function>``
form is accepted too.  Calls end at ``<|eom_id|>``/``<|eot_id|>`` or the end of output.
"""

from __future__ import annotations

import re

from ..block import NEED_MORE, Block, SniffBlock
from ..jsonblock import JsonBlock
from ..jsoncall import CallKeys, CallListReader
from .hermes import HermesToolParser
from .pythonic import PyListReader

__all__ = ["Llama3JsonToolParser"]

_KEYS = CallKeys(require_args=True)
_BUILTIN = re.compile(r"[A-Za-z_]\w*\.call\s*\(")
_TURN_ENDS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>")


class Llama3JsonToolParser(HermesToolParser):
    """Bare JSON calls at call position, ``;``-separated; ``<|python_tag|>`` optional."""

    start_markers = ("<|python_tag|>", "<function=")
    end_markers = ()
    drop_markers = _TURN_ENDS
    call_separators = ";"
    bare_calls = False

    def _calls_block(self) -> JsonBlock:
        return JsonBlock(CallListReader(self.sink, _KEYS, array=True, sequence=";"))

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        return self._calls_block() if text.startswith("{") else None

    def open_block(self, marker: str) -> Block | None:
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


class _DropMarker(Block):
    """Consumes nothing: the marker before it is dropped and its text scanned as content."""

    def feed(self, text: str) -> int | None:
        return 0

    def close(self) -> bool:
        return True
