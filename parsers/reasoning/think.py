"""Reasoning in ``<think>...</think>``: Qwen3, DeepSeek, GLM, Kimi, MiniMax, Step, Olmo.

The families differ only in whether the output may start inside the block without an
opening tag:

* The prompt decides (``thinking_forced_open``): Qwen3 (hybrid emits ``<think>``
  itself; 2507-Thinking / QwQ / Qwen3.5 prompts open it), DeepSeek V3.1/V3.2 (thinking
  on: the prompt ends ``<think>``), GLM-4.x, Kimi K2, Olmo 3.
* Always inside (``implicit_open``): DeepSeek-R1 (R1-0528 repeats ``<think>``, which is
  dropped), MiniMax-M2 (prompt ends ``<think>\\n``), Step-3 / Step-3.5.

``minimax_m2_append_think`` keeps the whole block in content, as MiniMax-M2 wants it
sent back verbatim in later turns.  DeepSeek V4, Holo2, Hunyuan v3 (``hy_v3``) and Poolside
Laguna (``poolside_v1``) think by default in vLLM; their prompts open the block when they do.
"""

from __future__ import annotations

from typing import ClassVar

from ..block import find_first
from ..thinking import ReasoningParser

__all__ = [
    "DeepSeekR1ReasoningParser",
    "DeepSeekV3ReasoningParser",
    "DeepSeekV4ReasoningParser",
    "Glm45ReasoningParser",
    "Holo2ReasoningParser",
    "HyV3ReasoningParser",
    "KimiK2ReasoningParser",
    "MinimaxM2AppendThinkReasoningParser",
    "MinimaxM2ReasoningParser",
    "Olmo3ReasoningParser",
    "PoolsideV1ReasoningParser",
    "Qwen3ReasoningParser",
    "Step3ReasoningParser",
    "Step3p5ReasoningParser",
]


class Qwen3ReasoningParser(ReasoningParser):
    """Qwen3 / QwQ / Qwen3.5: opened by the model or by the prompt.

    Qwen3.5 may start a call without closing the block: as in vLLM, ``<tool_call>``
    followed by ``<function`` ends the reasoning, while a ``<tool_call>`` merely quoted
    in the thoughts (no ``<function`` after it) stays reasoning.
    """

    guarded_exits = (("<tool_call>", ("<function=", "<function ")),)


class DeepSeekR1ReasoningParser(ReasoningParser):
    """DeepSeek-R1: reasoning until ``</think>`` whether or not ``<think>`` was emitted."""

    implicit_open = True


class DeepSeekV3ReasoningParser(ReasoningParser):
    """DeepSeek V3.x hybrid: like R1 when thinking was enabled (forced open), else content."""


class Glm45ReasoningParser(ReasoningParser):
    """GLM-4.5/4.6/4.7: the model writes ``<think>``; 4.6 puts an empty block in the prompt."""

    # SGLang's glm45 detector: a call started before ``</think>`` ends the reasoning (the
    # model skipped the closing tag), and the call stays in the content for the tool parser.
    exit_markers = ("<tool_call>",)


class KimiK2ReasoningParser(ReasoningParser):
    """Kimi K2-Thinking: a tool section may end the block without ``</think>``."""

    # vLLM's parser ends reasoning at the section marker itself, with or without a tool
    # parser; the singular spelling is the variant the kimi_k2 tool parser accepts.
    exit_markers = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")


class Olmo3ReasoningParser(ReasoningParser):
    """Olmo 3: plain-text ``<think>`` tags; templates may open the block in the prompt."""


class MinimaxM2ReasoningParser(ReasoningParser):
    """MiniMax-M2: the prompt ends with ``<think>``; output shows only ``</think>``."""

    implicit_open = True
    drop_stray_close = True


class MinimaxM2AppendThinkReasoningParser(ReasoningParser):
    """MiniMax-M2, keeping ``<think>...</think>`` in the content for the next turn."""

    implicit_open = True
    keep_in_content = True


class Step3ReasoningParser(ReasoningParser):
    """Step-3: everything before ``</think>`` is reasoning."""

    implicit_open = True


class Step3p5ReasoningParser(Step3ReasoningParser):
    """Step-3.5: ``<think>...</think>``, the opening tag optional.

    As in vLLM's step3p5 parser, text the model writes before its own ``<think>`` is
    content (``Intro<think>r</think>Answer`` gives content ``IntroAnswer``), and one
    newline right after ``</think>`` is dropped.  Reasoning never follows content in the
    event stream, so that prefix is held back until the block ends.  vLLM looks for
    ``<think>`` anywhere; here only an opening tag starting within ``prefix_window``
    characters (and before any ``</think>``) counts, so reasoning of a prompt-opened
    block is held back only that long before it streams.
    """

    prefix_window: ClassVar[int] = 128
    _trim_newline = False  # the block just closed: one newline after it is dropped
    _prefix = ""  # content written before the opening tag, sent when the block ends

    def _start(self, eof: bool) -> bool:
        stripped = self._buf.lstrip()
        if not stripped or any(tag.startswith(stripped[: len(tag)]) for tag in self.open_tags):
            return super()._start(eof)  # an opening tag at the start, or maybe one
        decided = self._prefix_open(eof)
        if decided is None:
            return False
        if not decided:
            return super()._start(eof)
        return True

    def _prefix_open(self, eof: bool) -> bool | None:
        """Did the model open its own block after a prefix?  None: not decidable yet.

        True once the prefix was set aside and the tag consumed.
        """
        idx, tag = find_first(self._buf, self.open_tags + self.close_tags)
        if 0 <= idx < self.prefix_window and tag in self.open_tags:
            self._prefix = self._buf[:idx]
            self._buf = self._buf[idx + len(tag) :]
            self._state = "reasoning"  # not an aside: the prefix is this block's preamble
            return True
        if idx >= 0 or eof:
            return False
        longest = max(len(t) for t in self.open_tags)
        # An opening tag starting inside the window may not have arrived whole yet.
        return False if len(self._buf) >= self.prefix_window + longest - 1 else None

    def _reasoning(self, eof: bool) -> bool:
        before = self._state
        progressed = super()._reasoning(eof)
        if before != self._state and self._state == "content":
            self._trim_newline = True
            self._flush_prefix()
        return progressed

    def finish(self) -> None:
        """End of output: a block left open still sends its prefix, after the reasoning."""
        super().finish()
        self._flush_prefix()

    def _flush_prefix(self) -> None:
        prefix, self._prefix = self._prefix, ""
        self._forward(prefix)

    def _content(self, eof: bool) -> bool:
        if self._trim_newline:
            if not self._buf:
                return False
            self._trim_newline = False
            if self._buf.startswith("\n"):
                self._buf = self._buf[1:]
                return True
        return super()._content(eof)


class DeepSeekV4ReasoningParser(DeepSeekV3ReasoningParser):
    """DeepSeek V4: a DSML call section may end the block without ``</think>``.

    vLLM's V4 parser starts in reasoning unless thinking is switched off; the V4 prompt
    ends ``<think>`` exactly then, which the router passes as ``thinking_forced_open``.
    """

    exit_markers = ("<｜DSML｜tool_calls>",)


class Holo2ReasoningParser(DeepSeekV3ReasoningParser):
    """Holo2 (Qwen3-based): ``<think>`` is in the prompt unless ``thinking=False``.

    vLLM runs it as DeepSeek V3 with thinking on by default; here the rendered prompt
    says whether the block is open.
    """


class HyV3ReasoningParser(ReasoningParser):
    """Hunyuan v3 (Hy3): ``<think>`` opens the block in the prompt when a reasoning effort is set.

    vLLM: ``reasoning_effort`` ``no_think`` (its default) passes everything through as
    content; otherwise reasoning runs until ``</think>``.
    """


class PoolsideV1ReasoningParser(DeepSeekV3ReasoningParser):
    """Poolside Laguna: DeepSeek V3 rules (reasoning until ``</think>`` when thinking is on).

    vLLM scopes its end-of-reasoning check to the last ``<assistant>`` turn of the prompt;
    the router's open-block check reads the end of the prompt, which is the same turn.
    """
