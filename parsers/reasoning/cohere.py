"""Cohere Command A / R7B (``cohere_command3``) and Command 4 (``cohere_command4``) text.

Command writes its turn as control-token sections, thinking first::

    <|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", ...}]<|END_ACTION|>
    <|START_THINKING|>...<|END_THINKING|><|START_RESPONSE|>answer<|END_RESPONSE|>   (Command A)
    <|START_THINKING|>...<|END_THINKING|><|START_TEXT|>answer<|END_TEXT|>            (Command 4)

An answer or action opener ends the thinking even without ``<|END_THINKING|>``, the
answer wrappers are dropped, and grounded spans lose their citation tags
(``<co>span</co: 0:[1,2]>`` -> ``span``) in both thinking and answer, as Cohere's
``melody`` filter (which vLLM runs) does; action blocks pass through untouched for the
tool parser (``parsers.tools.cohere``).  Command 3 outputs open the thinking block
themselves; Command 4 prompts open it (``<|START_THINKING|>`` ends the generation prompt
when reasoning is on), which the router sees as ``thinking_forced_open``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from ..block import partial_suffix_len
from ..sink import EventSink
from ..thinking import ReasoningParser

__all__ = ["ACTION_TAGS", "CitationStripper", "CohereCommand3ReasoningParser", "CohereCommand4ReasoningParser"]

ACTION_TAGS = ("<|START_ACTION|>", "<|END_ACTION|>")
_CITE_OPEN = "<co>"
# ``</co: 0:[1,2],1:[3]>``: the closing tag lists the sources, tool call id then result indexes.
_CITE_CLOSE = re.compile(r"</co:[\s\d:,\[\]]*>")
_CITE_CLOSE_START = re.compile(r"<(?:/(?:c(?:o(?::[\s\d:,\[\]]*)?)?)?)?")
_MAX_CITE_TAG = 128
_WAIT = object()


class CitationStripper:
    """Removes Command citation tags from streamed text, holding back a tag split across chunks."""

    def __init__(self, verbatim: tuple[tuple[str, str], ...] = ()) -> None:
        """Create the filter.

        Args:
            verbatim: ``(open, close)`` regions passed through untouched (action blocks,
                whose JSON may quote ``<co>`` in an argument).
        """
        self._verbatim = verbatim
        self._region_end: str | None = None
        self._buf = ""

    def push(self, text: str) -> str:
        """Add text; return what can be released now."""
        self._buf += text
        return self._drain(eof=False)

    def flush(self) -> str:
        """End of text: release everything held (an unfinished tag stays as written)."""
        return self._drain(eof=True)

    def _drain(self, eof: bool) -> str:
        out: list[str] = []
        while self._buf:
            if self._region_end is not None:
                if not self._pass_region(out, eof):
                    break
                continue
            lt = self._buf.find("<")
            if lt < 0:
                out.append(self._buf)
                self._buf = ""
                break
            out.append(self._buf[:lt])
            self._buf = self._buf[lt:]
            step = self._at_angle(eof)
            if step is _WAIT:
                break
            kept, used = step
            out.append(self._buf[:kept])
            self._buf = self._buf[used:]
        return "".join(out)

    def _pass_region(self, out: list[str], eof: bool) -> bool:
        """Copy a verbatim region up to its close; False while the close may still come."""
        end = self._region_end or ""
        idx = self._buf.find(end)
        if idx >= 0:
            out.append(self._buf[: idx + len(end)])
            self._buf = self._buf[idx + len(end) :]
            self._region_end = None
            return True
        keep = 0 if eof else partial_suffix_len(self._buf, (end,))
        out.append(self._buf[: len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep :]
        return False

    def _at_angle(self, eof: bool) -> tuple[int, int] | object:
        """At a ``<``: ``(characters kept, characters used)``, or ``_WAIT`` for more text."""
        buf = self._buf
        for start, end in self._verbatim:
            if buf.startswith(start):
                self._region_end = end
                return len(start), len(start)
        if buf.startswith(_CITE_OPEN):
            return 0, len(_CITE_OPEN)
        close = _CITE_CLOSE.match(buf)
        if close:
            return 0, close.end()
        if not eof and self._may_grow(buf):
            return _WAIT
        return 1, 1

    def _may_grow(self, buf: str) -> bool:
        if any(start.startswith(buf) for start, _ in self._verbatim) or _CITE_OPEN.startswith(buf):
            return True
        return len(buf) <= _MAX_CITE_TAG and _CITE_CLOSE_START.fullmatch(buf) is not None


class _Thoughts:
    """Stands in for the sink's reasoning side, so thinking text passes the citation filter."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.reasoning = write


class CohereCommand3ReasoningParser(ReasoningParser):
    """Command A / Command R7B: the model writes ``<|START_THINKING|>`` itself."""

    open_tags = ("<|START_THINKING|>",)
    close_tags = ("<|END_THINKING|>",)
    exit_markers: ClassVar[tuple[str, ...]] = ("<|START_RESPONSE|>",)
    content_wrappers: ClassVar[tuple[str, ...]] = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|END_OF_TURN_TOKEN|>")
    # Special tokens in the Command vocabulary, never prose.
    control_tags = True

    def __init__(self, sink: EventSink, content_out: Callable[[str], None], **options: Any) -> None:
        """Create the splitter; ``options`` are ``ReasoningParser``'s keyword arguments."""
        self._thought = CitationStripper()
        self._answer = CitationStripper(verbatim=(ACTION_TAGS,))
        self._reasoning_to = sink.reasoning
        self._content_to = content_out
        super().__init__(_Thoughts(self._add_thought), self._add_answer, **options)  # type: ignore[arg-type]

    def finish(self) -> None:
        """End of output: flush the splitter, then the citation filters."""
        super().finish()
        self._release_thought()
        rest = self._answer.flush()
        if rest:
            self._content_to(rest)

    def _add_thought(self, text: str) -> None:
        self._reasoning_to(self._thought.push(text))

    def _release_thought(self) -> None:
        self._reasoning_to(self._thought.flush())

    def _add_answer(self, text: str) -> None:
        # Thinking held back at a tag boundary goes out first: reasoning precedes content.
        self._release_thought()
        released = self._answer.push(text)
        if released:
            self._content_to(released)


class CohereCommand4ReasoningParser(CohereCommand3ReasoningParser):
    """Command 4: answers in ``<|START_TEXT|>`` (``<|START_RESPONSE|>`` still accepted)."""

    exit_markers: ClassVar[tuple[str, ...]] = ("<|START_TEXT|>", "<|START_RESPONSE|>")
    content_wrappers: ClassVar[tuple[str, ...]] = (
        "<|START_TEXT|>", "<|END_TEXT|>", *CohereCommand3ReasoningParser.content_wrappers)
