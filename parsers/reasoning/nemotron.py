"""NVIDIA Nemotron 3 (Nano, Super) reasoning: Qwen3's ``<think>`` format with one extra rule.

The template ends the generation prompt with ``<think>\\n`` when thinking is on and closes
the block there (``<think></think>``) when ``enable_thinking=False``; the router sees the
first as ``thinking_forced_open``.  As in vLLM's ``nemotron_v3`` parser, a turn whose
thinking was switched off but which wrote a think block and no answer has that block as
its answer: otherwise the client would get an empty message.  Such reasoning is held back
until it is known whether an answer follows (it then goes out as reasoning first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..sink import EventSink
from .think import Qwen3ReasoningParser

__all__ = ["NemotronV3ReasoningParser"]


class _HeldReasoning:
    """Stands in for the sink's reasoning side while thinking is off: keeps the text back."""

    def __init__(self, sink: EventSink) -> None:
        self._sink = sink
        self._parts: list[str] = []

    def reasoning(self, text: str) -> None:
        self._parts.append(text)

    def release(self) -> None:
        """An answer follows: the held text was reasoning after all."""
        if self._parts:
            self._sink.reasoning("".join(self._parts))
            self._parts.clear()

    def take(self) -> str:
        """No answer came: hand the held text over (it becomes the answer)."""
        text = "".join(self._parts)
        self._parts.clear()
        return text


class NemotronV3ReasoningParser(Qwen3ReasoningParser):
    """Nemotron 3: Qwen3 tags and implicit ends; with thinking off, an answerless block is the answer."""

    def __init__(self, sink: EventSink, content_out: Callable[[str], None], **options: Any) -> None:
        """Create the splitter; ``options`` are ``ReasoningParser``'s keyword arguments."""
        self._answer_out = content_out
        thinking = bool(options.get("forced_open")) or self.implicit_open
        self._held = None if thinking else _HeldReasoning(sink)
        if self._held is None:
            super().__init__(sink, content_out, **options)
        else:
            super().__init__(self._held, self._answer, **options)  # type: ignore[arg-type]

    def finish(self) -> None:
        """End of output; with thinking off and no answer, the held reasoning is the answer."""
        super().finish()
        if self._held is not None:
            text = self._held.take()
            if text:
                self._answer_out(text)

    def _answer(self, text: str) -> None:
        if self._held is not None and not text.isspace():
            self._held.release()
        self._answer_out(text)
