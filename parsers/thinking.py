"""Streaming splitter of reasoning text from content, configured per family by tags.

Reasoning is split *before* tool parsing, so a tool marker quoted while thinking is
reasoning, not a call, unless the tool family names it an implicit end of reasoning
(Kimi K2's tool section, Qwen3.5's ``<tool_call><function=``).  The opening tag is only
recognised at the start of the output; when the prompt already opened the block
(``thinking_forced_open``) or the family always starts inside it, the output begins in
reasoning and a repeated opening tag is dropped.  Without a closing tag, reasoning that
was opened stays reasoning (the output was cut off while thinking).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from .block import find_first, partial_suffix_len
from .sink import EventSink

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

    def __init__(self, sink: EventSink, content_out: Callable[[str], None], *,
                 forced_open: bool = False, exit_markers: tuple[str, ...] = ()) -> None:
        """Create the splitter.

        Args:
            sink: Receives reasoning text.
            content_out: Receives content text (usually the tool-call stream).
            forced_open: The prompt ended inside an open think block.
            exit_markers: Tool markers that end reasoning implicitly; they stay in the
                content stream.
        """
        self._sink, self._out = sink, content_out
        self._forced = forced_open or self.implicit_open
        self._exits = exit_markers
        self._ends = self.close_tags + exit_markers
        self._state = "start"
        self._buf = ""

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
        while self._buf:
            if self._state == "start":
                if not self._start(eof):
                    return
            elif self._state == "reasoning":
                if not self._reasoning(eof):
                    return
            else:
                self._content(eof)
                return

    def _emit(self, text: str) -> None:
        if self._state == "reasoning":
            self._sink.reasoning(text)
        else:
            self._out(text)

    def _start(self, eof: bool) -> bool:
        if self.keep_in_content:
            self._state = "content"
            if self._forced and not self._buf.lstrip().startswith(self.open_tags):
                self._out(self.open_tags[0])
            return True
        stripped = self._buf.lstrip()
        if not stripped:
            if eof:
                self._state = "reasoning" if self._forced else "content"
            return eof
        for tag in self.open_tags:
            if stripped.startswith(tag):
                self._buf = stripped[len(tag) :]
                self._state = "reasoning"
                return True
        if not eof and any(tag.startswith(stripped) for tag in self.open_tags):
            return False
        self._state = "reasoning" if self._forced else "content"
        return True

    def _reasoning(self, eof: bool) -> bool:
        idx, marker = find_first(self._buf, self._ends)
        if idx < 0:
            keep = 0 if eof else partial_suffix_len(self._buf, self._ends)
            self._sink.reasoning(self._buf[: len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep :]
            return False
        self._sink.reasoning(self._buf[:idx])
        # A closing tag is consumed; an implicit exit marker belongs to the content.
        self._buf = self._buf[idx + (len(marker) if marker in self.close_tags else 0) :]
        self._state = "content"
        return True

    def _content(self, eof: bool) -> None:
        if not self.content_wrappers:
            self._out(self._buf)
            self._buf = ""
            return
        while True:
            idx, tag = find_first(self._buf, self.content_wrappers)
            if idx < 0:
                break
            self._out(self._buf[:idx])
            self._buf = self._buf[idx + len(tag) :]
        keep = 0 if eof else partial_suffix_len(self._buf, self.content_wrappers)
        self._out(self._buf[: len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep :]

