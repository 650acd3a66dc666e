"""Mistral tool calls, all template generations, with or without control tokens.

* <= v3 (7B v0.3, Nemo): ``[TOOL_CALLS] [{"name": ..., "arguments": {...}, "id": "abcDEF123"}]``
  (key order varies; the id often comes after the arguments, so such calls are sent
  whole when they close rather than streamed).
* v11+ (Small 3.x, Devstral, Magistral): ``[TOOL_CALLS]add[ARGS]{"a": 3.5}``, repeated;
  Small 3.2 inserts ``[CALL_ID]id`` before ``[ARGS]``: the name is the word before
  ``[CALL_ID]``, never the id.
* With special tokens skipped the text is ``[TOOL_CALLS]add{...}`` or just ``add{...}``
  / ``[{...}]``; those are accepted at call position when they name an offered tool.

There is no end marker: a call ends with its JSON.  Generated ids are 9 alphanumerics,
the only length Mistral templates accept back in the history.
"""

from __future__ import annotations

import re

from ..base import new_call_id
from ..block import NEED_MORE, Block, SniffBlock
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock
from ..jsoncall import CallKeys, CallListReader

__all__ = ["MistralToolParser"]

_HEADER = re.compile(r"\s*(?P<name>[A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*(?P<id>[\w\-]+)\s*)?(?:\[ARGS\])?\s*")
_BARE = re.compile(r"(?P<name>[A-Za-z_][\w.\-]*)(?:\[CALL_ID\][\w\-]+)?(?:\[ARGS\])?\s*\{")
_KEYS = CallKeys(wait_for_id=True)


def _parse_header(text: str) -> tuple[str, str | None] | None:
    m = _HEADER.fullmatch(text)
    return (m.group("name"), m.group("id")) if m else None


class MistralToolParser(ToolStream):
    """``[TOOL_CALLS]`` followed by a JSON array (v3) or ``name[ARGS]{json}`` (v11+)."""

    start_markers = ("[TOOL_CALLS]",)
    drop_markers = ("</s>",)
    bare_calls = True

    @staticmethod
    def make_call_id() -> str:
        """Mistral templates reject ids that are not exactly 9 alphanumerics."""
        return new_call_id(9, prefix="")

    def open_block(self, marker: str) -> Block | None:
        return SniffBlock(self._choose)

    def _choose(self, text: str, eof: bool):
        body = text.lstrip()
        if not body:
            return None if eof else NEED_MORE
        if body[0] == "[":
            return JsonBlock(CallListReader(self.sink, _KEYS, single=False))
        if body[0] == "{":
            return JsonBlock(CallListReader(self.sink, _KEYS, array=False))
        if body[0].isalpha() or body[0] == "_":
            return self._header_block()
        return None

    def _header_block(self) -> JsonBlock:
        return JsonBlock(HeaderArgsReader(self.sink, _parse_header, max_header=256))

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        """``add{...}`` at call position, when the control tokens were stripped."""
        names = self.tools.names
        if not names:
            return None
        m = _BARE.match(text)
        if m:
            return self._header_block() if m.group("name") in names else None
        viable = re.fullmatch(r"[A-Za-z_][\w.\-]*(\[[A-Z_]*\]?[\w\-]*)*(\[ARGS\])?\s*", text)
        if not eof and viable and len(text) < 128 and any(n.startswith(text[: len(n)]) for n in names):
            return NEED_MORE
        return None
