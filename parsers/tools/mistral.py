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
the only length Mistral templates accept back in the history.  A body that is none of
these shapes gets vLLM's pre-v11 fallback: the first ``[{`` after the marker is read as
the call array (the text before it is dropped); when nothing parses, the text goes back
to content without the ``[TOOL_CALLS]`` control token.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..base import NotACallError, new_call_id
from ..block import NEED_MORE, Block, SniffBlock
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock
from ..jsoncall import CallKeys, CallListReader

if TYPE_CHECKING:
    from ..sink import EventSink

__all__ = ["MistralToolParser"]

_HEADER = re.compile(r"\s*(?P<name>[A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*(?P<id>[\w\-]+)\s*)?(?:\[ARGS\])?\s*")
_BARE = re.compile(r"(?P<name>[A-Za-z_][\w.\-]*)(?:\[CALL_ID\][\w\-]+)?(?:\[ARGS\])?\s*\{")
# What a header may look like before its ``{`` arrives (control tokens still growing).
_HEADER_PREFIX = re.compile(r"[A-Za-z_][\w.\-]*\s*(?:\[[A-Z_]*\]?\s*[\w\-]*\s*)*")
_MAX_HEADER = 256
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
        return _CallsBlock(self.sink, SniffBlock(self._choose))

    def _choose(self, text: str, eof: bool):
        body = text.lstrip()
        if not body:
            return None if eof else NEED_MORE
        if body[0] == "[":
            return JsonBlock(CallListReader(self.sink, _KEYS, single=False))
        if body[0] == "{":
            return JsonBlock(CallListReader(self.sink, _KEYS, array=False))
        if body[0].isalpha() or body[0] == "_":
            return self._choose_header(body, eof)
        return None

    def _choose_header(self, body: str, eof: bool):
        """``name[CALL_ID]id[ARGS]{``; prose after the marker goes to the array search."""
        brace = body.find("{")
        if brace >= 0:
            return self._header_block() if _HEADER.fullmatch(body[:brace]) else None
        if not _HEADER_PREFIX.fullmatch(body) or len(body) > _MAX_HEADER:
            return None
        return self._header_block() if eof else NEED_MORE

    def _header_block(self) -> JsonBlock:
        return JsonBlock(HeaderArgsReader(self.sink, _parse_header, max_header=_MAX_HEADER))

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


_MARKER = "[TOOL_CALLS]"


class _CallsBlock(Block):
    """The text after ``[TOOL_CALLS]``: the strict shapes first, then the array search.

    Once the strict block rejects the text (nothing emitted yet), the first ``[{`` is
    parsed as a call array.  Before one appears the text is held; when the output ends
    or the next ``[TOOL_CALLS]`` comes first, or the array does not parse, the whole text
    goes back to content and the marker is dropped.
    """

    def __init__(self, sink: EventSink, strict: Block) -> None:
        self._sink = sink
        self._inner: Block | None = strict
        self._searching = False
        # All block input, kept as parts (joined only when needed) so a long call stays linear.
        self._parts: list[str] = []
        self._size = 0
        self._tail = ""  # end of the searched text, where "[{" or the marker may be split
        self._skip = 0  # where the found array starts in the block input
        self.leftover = ""

    @property
    def committed(self) -> int:  # type: ignore[override]
        done = self._inner.committed if self._inner is not None else 0
        return self._skip + done if done else 0

    @property
    def malformed(self) -> bool:  # type: ignore[override]
        return self._inner is not None and self._inner.malformed

    def feed(self, text: str) -> int | None:
        before = self._size
        self._parts.append(text)
        self._size += len(text)
        if self._inner is None:
            return self._search(before, self._tail + text, before - len(self._tail))
        try:
            return self._inner.feed(text)
        except NotACallError:
            if self._inner.committed:
                raise
        if self._searching:
            return self._give_up(before)
        return self._start_search(before)

    def close(self) -> bool:
        used = None
        if self._inner is not None:
            try:
                return self._inner.close()
            except NotACallError:
                if self._inner.committed or self._searching:
                    raise
            used = self._start_search(self._size)
            if used is None and self._inner is not None:
                return self._inner.close()  # an array began: complete, or truncated
        # The block ended ``used`` characters from the end (or holds only text): the rest is content.
        self.leftover = self._text()[self._size + used :] if used is not None else self._text()
        return True

    def _text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _start_search(self, before: int) -> int | None:
        self._sink.abandon()
        self._searching, self._inner = True, None
        return self._search(before, self._text(), 0)

    def _search(self, before: int, window: str, offset: int) -> int | None:
        """Look for the call array in ``window`` (block input from ``offset`` on).

        ``before`` is how much input came before the current chunk.
        """
        start, marker = window.find("[{"), window.find(_MARKER)
        self._tail = window[-(len(_MARKER) - 1) :]
        if marker >= 0 and (start < 0 or marker < start):
            return -before  # the next call block starts first: this text is content
        if start < 0:
            return None
        self._skip = start = offset + start
        self._inner = JsonBlock(CallListReader(self._sink, _KEYS, single=False))
        try:
            used = self._inner.feed(self._text()[start:])
        except NotACallError:
            if self._inner.committed:
                raise
            return self._give_up(before)
        return None if used is None else start + used - before

    def _give_up(self, before: int) -> int:
        """Nothing parses: hand all the text back (the marker stays dropped)."""
        self._sink.abandon()
        self._inner = None
        return -before
