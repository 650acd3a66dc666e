"""Reasoning in ``<think>...</think>``: Qwen3, DeepSeek, GLM, Kimi, MiniMax, Step, Olmo.

The families differ only in whether the output may start inside the block without an
opening tag:

* The prompt decides (``thinking_forced_open``): Qwen3 (hybrid emits ``<think>``
  itself; 2507-Thinking / QwQ / Qwen3.5 prompts open it), DeepSeek V3.1/V3.2 (thinking
  on: the prompt ends ``<think>``), GLM-4.x, Kimi K2, Olmo 3.
* Always inside (``implicit_open``): DeepSeek-R1 (R1-0528 repeats ``<think>``, which is
  dropped), MiniMax-M2 (prompt ends ``<think>\\n``), Step-3 / Step-3.5.

``minimax_m2_append_think`` keeps the whole block in content, as MiniMax-M2 wants it
sent back verbatim in later turns.
"""

from __future__ import annotations

from ..thinking import ReasoningParser

__all__ = [
    "DeepSeekR1ReasoningParser",
    "DeepSeekV3ReasoningParser",
    "Glm45ReasoningParser",
    "KimiK2ReasoningParser",
    "MinimaxM2AppendThinkReasoningParser",
    "MinimaxM2ReasoningParser",
    "Olmo3ReasoningParser",
    "Qwen3ReasoningParser",
    "Step3ReasoningParser",
    "Step3p5ReasoningParser",
]


class Qwen3ReasoningParser(ReasoningParser):
    """Qwen3 / QwQ / Qwen3.5: opened by the model or by the prompt."""


class DeepSeekR1ReasoningParser(ReasoningParser):
    """DeepSeek-R1: reasoning until ``</think>`` whether or not ``<think>`` was emitted."""

    implicit_open = True


class DeepSeekV3ReasoningParser(ReasoningParser):
    """DeepSeek V3.x hybrid: like R1 when thinking was enabled (forced open), else content."""


class Glm45ReasoningParser(ReasoningParser):
    """GLM-4.5/4.6/4.7: the model writes ``<think>``; 4.6 puts an empty block in the prompt."""


class KimiK2ReasoningParser(ReasoningParser):
    """Kimi K2-Thinking: a tool section may end the block without ``</think>``."""


class Olmo3ReasoningParser(ReasoningParser):
    """Olmo 3: plain-text ``<think>`` tags; templates may open the block in the prompt."""


class MinimaxM2ReasoningParser(ReasoningParser):
    """MiniMax-M2: the prompt ends with ``<think>``; output shows only ``</think>``."""

    implicit_open = True


class MinimaxM2AppendThinkReasoningParser(ReasoningParser):
    """MiniMax-M2, keeping ``<think>...</think>`` in the content for the next turn."""

    implicit_open = True
    keep_in_content = True


class Step3ReasoningParser(ReasoningParser):
    """Step-3: everything before ``</think>`` is reasoning."""

    implicit_open = True


class Step3p5ReasoningParser(Step3ReasoningParser):
    """Step-3.5: ``<think>...</think>``, the opening tag optional."""
