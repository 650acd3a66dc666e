"""Streaming splitter of reasoning text from content, configured per family by tags.

Reasoning is split *before* tool parsing, so a tool marker quoted while thinking is
reasoning, not a call, unless the tool family names it an implicit end of reasoning
(Kimi K2's tool section, Qwen3.5's ``<tool_call><function=``); the reasoning family may
name its own implicit ends too, as vLLM's reasoning parsers do.  The opening tag is
only recognised at the start of the output, unless the family's tags are control tokens
(Mistral, Gemma 4); when the prompt already opened the block (``thinking_forced_open``)
or the family always starts inside it, the output begins in reasoning and a repeated
opening tag is dropped.  Without a closing tag, reasoning that was opened stays
reasoning (the output was cut off while thinking).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

from .block import find_first, partial_suffix_len
from .sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["ReasoningParser"]


class ReasoningParser:
    """Per-request reasoning splitter; subclasses set the class attributes."""

    open_tags: ClassVar[tuple[str, ...]] = ("<think>",)
    close_tags: ClassVar[tuple[str, ...]] = ("</think>",)
    implicit_open: ClassVar[bool] = False
    """The family's prompt always opens the block (DeepSeek-R1, MiniMax-M2, ERNIE)."""
    content_wrappers: ClassVar[tuple[str, ...]] = ()
    """Tags dropped from content (Hunyuan's ``<answer>``, ERNIE's ``<response>``)."""
    keep_in_content: ClassVar[bool] = False
    """Send the think block to content verbatim (``minimax_m2_append_think``)."""
    exit_markers: ClassVar[tuple[str, ...]] = ()
    """The family's own implicit ends of reasoning; like the tool parser's, they stay in
    the content stream (Kimi K2's tool section, Gemma 4's ``<|tool_call>``)."""
    guarded_exits: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    """``(marker, follows)``: the marker ends reasoning only when one of ``follows`` comes
    next after optional whitespace, else it is quoted reasoning text (Qwen3's
    ``<tool_call>`` before ``<function=``)."""
    control_tags: ClassVar[bool] = False
    """The tags are control tokens, never prose (Mistral, Gemma 4): a block may open after
    content, and a closing tag with no block open is dropped from content."""
    drop_stray_close: ClassVar[bool] = False
    """A closing tag met in the content (no block open) is dropped, not sent on: MiniMax-M2
    re-emits ``</think>`` after its answer has begun (vLLM strips it).  Tags after a call
    marker belong to the calls and are left alone."""
    block_labels: ClassVar[tuple[str, ...]] = ()
    """Role labels a block may open with, dropped with the newline after them (Gemma 4's
    ``thought``)."""

    def __init__(self, sink: EventSink, content_out: Callable[[str], None], *,
                 forced_open: bool = False, exit_markers: tuple[str, ...] = (),
                 call_markers: tuple[str, ...] = ()) -> None:
        """Create the splitter.

        Args:
            sink: Receives reasoning text.
            content_out: Receives content text (usually the tool-call stream).
            forced_open: The prompt ended inside an open think block.
            exit_markers: Tool markers that end reasoning implicitly; they stay in the
                content stream.
            call_markers: The tool parser's call start markers; with ``control_tags``,
                tags after one belong to the calls and are left alone.
        """
        self._sink, self._out = sink, content_out
        self._forced = forced_open or self.implicit_open
        self._guards = dict(self.guarded_exits)
        self._ends = self.close_tags + self.exit_markers + exit_markers + tuple(self._guards)
        self._content_tags = self.content_wrappers
        self._call_markers = self.exit_markers + exit_markers + call_markers
        if self.control_tags:
            self._content_tags += self.open_tags + self.close_tags + self._call_markers
        elif self.drop_stray_close:
            self._content_tags += self.close_tags + self._call_markers
        self._state = "start"
        self._buf = ""
        self._label_pending = False
        # Non-space content was forwarded, so a think block opening now cannot be reasoning.
        self._answered = False

    def feed(self, text: str) -> None:
        """Consume a chunk of output."""
        self._buf += text
        self._run(eof=False)

    def finish(self) -> None:
        """End of output: flush everything held back."""
        self._run(eof=True)
        if self._buf:
            self._emit(self._buf)
            self._buf = ""

    def _run(self, eof: bool) -> None:
        # Each step returns True when it changed state and the buffer needs another look.
        while self._buf:
            if self._state == "start":
                progressed = self._start(eof)
            elif self._state in ("reasoning", "aside"):
                progressed = self._reasoning(eof)
            else:
                progressed = self._content(eof)
            if not progressed:
                return

    def _emit(self, text: str) -> None:
        if self._state in ("reasoning", "aside"):
            self._think(text)
        else:
            self._forward(text)

    def _think(self, text: str) -> None:
        """Text inside a think block: reasoning, or dropped in a block opened after content."""
        if self._state == "reasoning":
            self._sink.reasoning(text)
        elif text:
            # Reasoning never follows content in the event stream, and vLLM keeps such a
            # block out of the content too, so its text goes nowhere.
            logger.debug("dropped %d characters of a think block opened after content", len(text))

    def _forward(self, text: str) -> None:
        if text:
            self._answered = self._answered or not text.isspace()
            self._out(text)

    def _enter_reasoning(self) -> None:
        self._state = "aside" if self._answered else "reasoning"
        self._label_pending = bool(self.block_labels)

    def _start(self, eof: bool) -> bool:
        if self.keep_in_content:
            self._state = "content"
            if self._forced and not self._buf.lstrip().startswith(self.open_tags):
                self._forward(self.open_tags[0])
            return True
        stripped = self._buf.lstrip()
        if not stripped:
            if eof:
                self._start_without_tag()
            return eof
        for tag in self.open_tags:
            if stripped.startswith(tag):
                self._buf = stripped[len(tag) :]
                self._enter_reasoning()
                return True
        if not eof and any(tag.startswith(stripped) for tag in self.open_tags):
            return False
        self._start_without_tag()
        return True

    def _start_without_tag(self) -> None:
        if self._forced:
            self._enter_reasoning()
        else:
            self._state = "content"

    def _drop_label(self, eof: bool) -> bool:
        """Drop the block's role label (``thought`` then a newline, or an empty block).

        Returns:
            False while the buffer may still grow into a label.
        """
        for label in self.block_labels:
            for after in ("\n", *self.close_tags):
                if self._buf.startswith(label + after):
                    self._buf = self._buf[len(label) + (after == "\n") :]
                    self._label_pending = False
                    return True
                if not eof and (label + after).startswith(self._buf):
                    return False
        self._label_pending = False
        return True

    def _reasoning(self, eof: bool) -> bool:
        if self._label_pending and not self._drop_label(eof):
            return False
        start = 0
        while True:
            idx, marker = find_first(self._buf, self._ends, start)
            if idx < 0:
                keep = 0 if eof else partial_suffix_len(self._buf, self._ends)
                self._think(self._buf[: len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep :]
                return False
            ends = self._confirmed(marker, self._buf[idx + len(marker) :], eof)
            if ends is None:  # a guarded marker whose next characters have not arrived
                self._think(self._buf[:idx])
                self._buf = self._buf[idx:]
                return False
            if ends:
                break
            start = idx + len(marker)
        self._think(self._buf[:idx])
        # A closing tag is consumed; an implicit exit marker belongs to the content.
        self._buf = self._buf[idx + (len(marker) if marker in self.close_tags else 0) :]
        self._state = "content"
        return True

    def _confirmed(self, marker: str, after: str, eof: bool) -> bool | None:
        """Does ``marker`` end the block?  None while a guarded marker is undecided."""
        follows = self._guards.get(marker)
        if follows is None:
            return True
        rest = after.lstrip()
        if rest.startswith(follows):
            return True
        if not eof and (not rest or any(f.startswith(rest) for f in follows)):
            return None
        return False

    def _content(self, eof: bool) -> bool:
        if not self._content_tags:
            self._forward(self._buf)
            self._buf = ""
            return False
        idx, tag = find_first(self._buf, self._content_tags)
        if idx < 0:
            keep = 0 if eof else partial_suffix_len(self._buf, self._content_tags)
            self._forward(self._buf[: len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep :]
            return False
        self._forward(self._buf[:idx])
        self._buf = self._buf[idx + len(tag) :]
        if tag in self.content_wrappers:
            return True
        if tag in self._call_markers:
            # Calls have begun: a control tag quoted in their arguments is argument text.
            self._content_tags = self.content_wrappers
            self._forward(tag)
        elif tag in self.open_tags:
            self._enter_reasoning()
        # else a closing tag with no block open: dropped, as vLLM does.
        return True

