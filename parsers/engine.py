"""The marker-delimited streaming engine every tool-call family is a configuration of.

``ToolStream`` splits content text from call blocks.  In content it looks for the
family's start markers with one compiled regex over only the new text, holding back a
suffix that could be the start of a marker (``body</`` waits for the next chunk), and
it ignores markers inside Markdown code fences.  A start marker opens a ``Block`` from
the family's ``open_block``; a block that turns out not to be a call hands its text
back as content, and one cut off by the end of output comes back as content with
``truncated_call`` set.  "Call position" (start of content, or just after a call) is
where families with unmarked calls (bare JSON, ``[f(x=1)]``, ``name{...}``) may begin.
"""

from __future__ import annotations

import logging
import re
from typing import ClassVar

from .base import NotACallError
from .block import NEED_MORE, Block, find_first, partial_suffix_len
from .jsonblock import BareBlock
from .sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["ToolStream"]

_FENCE = "```"


class _Markers:
    """Compiled marker set of one family class."""

    def __init__(self, markers: tuple[str, ...]) -> None:
        ordered = sorted(set(markers) | {_FENCE}, key=len, reverse=True)
        self.regex = re.compile("|".join(map(re.escape, ordered)))
        self.all = tuple(ordered)
        self.growable = {m for m in ordered if any(o != m and o.startswith(m) for o in ordered)}


def _bare_start(buf: str, eof: bool) -> bool | object:
    """Does content start like a whole-message JSON call (``{``, ``[{``, a code fence)?"""
    if buf[0] == "{" or buf.startswith(_FENCE):
        return True
    if buf[0] == "[":
        rest = buf[1:].lstrip()
        if not rest:
            return False if eof else NEED_MORE
        return rest[0] == "{"
    if buf[0] == "`" and len(buf) < 3:
        return False if eof else NEED_MORE
    return False


class ToolStream:
    """Streaming tool-call parser for one request; subclass per family.

    Class attributes configure the family; ``open_block`` (and optionally
    ``leading_block``) build the blocks that parse calls.
    """

    start_markers: ClassVar[tuple[str, ...]] = ()
    """Markers that open a call block (passed to ``open_block``)."""
    drop_markers: ClassVar[tuple[str, ...]] = ()
    """Markers removed from content: section wrappers, end-of-turn tokens."""
    end_markers: ClassVar[tuple[str, ...]] = ()
    """Block closers: a block still open at the end of output that contains one was
    malformed, not truncated (its text is content, and scanning resumes after it)."""
    reasoning_exit_markers: ClassVar[tuple[str, ...]] = ()
    """Markers that end reasoning implicitly (Kimi K2, Qwen3.5, DeepSeek V3.1)."""
    call_separators: ClassVar[str] = ""
    """Characters dropped between consecutive calls (``;`` for Llama 3)."""
    bare_calls: ClassVar[bool] = False
    """Accept a whole message that is a JSON call (or a list of them) when tools were sent."""

    _compiled: ClassVar[dict[type, _Markers]] = {}

    def __init__(self, sink: EventSink) -> None:
        """Create the per-request state.

        Args:
            sink: Event sink shared with the rest of the pipeline.
        """
        self.sink = sink
        self.tools = sink.tools
        cls = type(self)
        if cls not in ToolStream._compiled:
            ToolStream._compiled[cls] = _Markers(cls.start_markers + cls.drop_markers)
        self._m = ToolStream._compiled[cls]
        self._drop = set(cls.drop_markers)
        self._pending = ""
        self._block: Block | None = None
        self._marker = ""
        self._raw: list[str] = []
        self._in_fence = False
        self._line_blank = True
        self._at_call_pos = True
        self._after_block = False
        self._content_seen = False
        self._delegate: ToolStream | None = None

    # -- family hooks ----------------------------------------------------------------

    def open_block(self, marker: str) -> Block | None:
        """Build the block for a start marker, or None to keep the marker as content."""
        raise NotImplementedError

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        """Recognise an unmarked call at call position.

        Args:
            text: Content from the first non-space character on.
            eof: No more text will come.

        Returns:
            A block (fed from ``text[0]``), None, or ``NEED_MORE`` (never at eof).
        """
        return None

    def bare_block(self) -> Block:
        """The block for a whole-message JSON call (``bare_calls``)."""
        return BareBlock(self.sink)

    # -- driving ---------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """Consume a chunk of content text; events go to the sink."""
        if self._delegate is not None:
            self._delegate.feed(text)
            return
        self._pending += text
        self._run(eof=False)

    def finish(self) -> None:
        """End of output: flush held text, complete or return open blocks."""
        if self._delegate is None:
            self._run(eof=True)
            while self._block is not None and self._delegate is None:
                self._close_block()
        if self._delegate is not None:
            self._delegate.finish()

    def hand_over(self, stream: ToolStream, text: str) -> None:
        """Route this and all later text to another family's stream (used by ``auto``)."""
        self._delegate = stream
        self._block = None
        stream.feed(text + self._pending)
        self._pending = ""

    def _run(self, eof: bool) -> None:
        while self._pending and self._delegate is None:
            if self._block is not None:
                if not self._feed_block():
                    return
            elif not self._scan(eof):
                return

    # -- content ---------------------------------------------------------------------

    def emit_content(self, text: str) -> None:
        """Send text to content, tracking line starts and call position."""
        if not text:
            return
        self.sink.content(text)
        nl = text.rfind("\n")
        tail_blank = not text[nl + 1 :].strip()
        self._line_blank = tail_blank if nl >= 0 else (self._line_blank and tail_blank)
        if (not self._content_seen or self._at_call_pos) and text.strip():
            self._content_seen = True
            self._at_call_pos = False

    def _scan(self, eof: bool) -> bool:
        """Process pending content; return False when waiting for more text."""
        if self._at_call_pos and not self._in_fence:
            progressed = self._call_position(eof)
            if progressed is not None:
                return progressed
        buf = self._pending
        m = self._m.regex.search(buf)
        while m is not None and self._in_fence and m.group() != _FENCE:
            m = self._m.regex.search(buf, m.start() + 1)
        if m is not None and not eof and m.end() == len(buf) and m.group() in self._m.growable:
            self.emit_content(buf[: m.start()])
            self._pending = buf[m.start() :]
            return False
        if m is None:
            keep = 0 if eof else self._partial_marker_len(buf)
            self.emit_content(buf[: len(buf) - keep])
            self._pending = buf[len(buf) - keep :]
            return False
        self.emit_content(buf[: m.start()])
        self._pending = buf[m.end() :]
        self._on_marker(m.group())
        return True

    def _on_marker(self, marker: str) -> None:
        if marker == _FENCE:
            if self._line_blank:
                self._in_fence = not self._in_fence
            self.emit_content(marker)
            return
        if marker in self._drop and marker not in self.start_markers:
            return
        block = self.open_block(marker)
        if block is None:
            self.emit_content(marker)
        else:
            self._open(block, marker)

    def _partial_marker_len(self, buf: str) -> int:
        return partial_suffix_len(buf, self._m.all)

    def _call_position(self, eof: bool) -> bool | None:
        """Skip whitespace (and separators after a call) and try an unmarked call."""
        buf = self._pending
        seps = self.call_separators if self._after_block else ""
        i = 0
        while i < len(buf) and (buf[i].isspace() or buf[i] in seps):
            i += 1
        if i:
            gap = buf[:i]
            self.emit_content("".join(ch for ch in gap if ch not in seps) if seps else gap)
            self._pending = buf = buf[i:]
        if not buf:
            return False
        if self.bare_calls and not self._content_seen and not self.sink.calls_started and self.tools.names:
            bare = _bare_start(buf, eof)
            if bare is NEED_MORE:
                return False
            if bare:
                self._open(self.bare_block(), "")
                return True
        found = self.leading_block(buf, eof)
        if found is NEED_MORE:
            return False
        if isinstance(found, Block):
            self._open(found, "")
            return True
        self._at_call_pos = False
        return None

    # -- blocks ----------------------------------------------------------------------

    def _open(self, block: Block, marker: str) -> None:
        self._block, self._marker, self._raw = block, marker, []

    def _feed_block(self) -> bool:
        buf, self._pending = self._pending, ""
        block = self._block
        try:
            used = block.feed(buf)
        except NotACallError as exc:
            logger.debug("not a tool call (%s); keeping the text as content", exc)
            self._raw.append(buf)
            self._reject()
            return True
        if used is None:
            self._raw.append(buf)
            return False
        raw = "".join(self._raw) + buf
        cut = len(raw) - len(buf) + used
        self._pending = raw[cut:]
        self._block, self._raw = None, []
        if block.malformed:
            self.sink.abandon()
            start = block.committed
            self.emit_content(("" if start else self._marker) + raw[start:cut])
            self._at_call_pos = False
            return True
        self._at_call_pos = self._after_block = True
        return True

    def _reject(self) -> None:
        """The open block is not a call: its text goes back through content scanning."""
        block, raw = self._block, "".join(self._raw)
        self._block, self._raw = None, []
        self.sink.abandon()
        self._at_call_pos = False
        if block.committed:
            self._pending = raw[block.committed :] + self._pending
        elif self._marker:
            if self._marker.startswith(_FENCE) and self._marker != _FENCE:
                # A family's fence marker (```json) that held no call still opens a code fence.
                self._in_fence = not self._in_fence
            self.emit_content(self._marker)
            self._pending = raw + self._pending
        else:  # an unmarked call: rescan as plain content (not at call position any more)
            self._pending = raw + self._pending

    def _close_block(self) -> None:
        """End of output with a block open: complete it, or return its text."""
        block = self._block
        try:
            complete = block.close()
        except NotACallError:
            self._reject()
            self._run(eof=True)
            return
        if complete:
            self._block, self._raw = None, []
            self._pending = block.leftover
            self._at_call_pos = self._after_block = True
            self._run(eof=True)
            return
        self.sink.abandon()
        raw = "".join(self._raw)
        self._block, self._raw = None, []
        text = raw[block.committed :] if block.committed else self._marker + raw
        idx, end = find_first(text, self.end_markers, len(self._marker) if not block.committed else 0)
        if idx >= 0:
            # A closed but unparsable block is malformed, not truncated: keep scanning after it.
            self.emit_content(text[: idx + len(end)])
            self._pending = text[idx + len(end) :]
            self._at_call_pos = False
            self._run(eof=True)
            return
        self.emit_content(text)
        self.sink.truncated_call = True
