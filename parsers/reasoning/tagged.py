"""Reasoning delimited by family-specific tags, and answers wrapped in their own tags.

=================  ==============================================================
seed_oss           ``<seed:think>...</seed:think>`` (budget-reflect tags stay inside)
mistral            ``[THINK]...[/THINK]`` (Magistral, Ministral 3 reasoning)
gemma4             ``<|channel>thought\\n...<channel|>`` (``<|tool_call>`` also ends it)
hunyuan_a13b       ``<think>...</think>`` then the answer in ``<answer>...</answer>``
ernie45            ``...</think>`` (prompt opened it) then ``<response>...</response>``
granite            Granite 3.2 ``Here is my thought process: ... Here is my response: ...``;
                   Granite 3.3 ``<think>...</think><response>...</response>``
=================  ==============================================================
"""

from __future__ import annotations

from ..thinking import ReasoningParser

__all__ = [
    "Ernie45ReasoningParser",
    "Gemma4ReasoningParser",
    "GraniteReasoningParser",
    "HunyuanA13bReasoningParser",
    "MistralReasoningParser",
    "SeedOssReasoningParser",
]


class SeedOssReasoningParser(ReasoningParser):
    """Seed-OSS: calls quoted inside the think block are reasoning, not calls."""

    open_tags = ("<seed:think>",)
    close_tags = ("</seed:think>",)


class MistralReasoningParser(ReasoningParser):
    """Magistral / Ministral 3: ``[THINK]`` control tokens.

    As in vLLM, a block may follow content (the text around it is the content) and a
    ``[/THINK]`` with no ``[THINK]`` before it is dropped, its text staying content.
    """

    open_tags = ("[THINK]",)
    close_tags = ("[/THINK]",)
    control_tags = True


class Gemma4ReasoningParser(ReasoningParser):
    """Gemma 4 thought channel: ``<|channel>`` opens it whatever the channel name.

    As in vLLM, the ``thought`` label and its newline are dropped (another name stays in
    the reasoning text), ``<|tool_call>`` ends the channel implicitly, and the markers
    are control tokens (see ``control_tags``).
    """

    open_tags = ("<|channel>",)
    close_tags = ("<channel|>",)
    block_labels = ("thought",)
    exit_markers = ("<|tool_call>",)
    control_tags = True


class HunyuanA13bReasoningParser(ReasoningParser):
    """Hunyuan-A13B: the ``<answer>`` wrapper is removed from content."""

    content_wrappers = ("<answer>", "</answer>")
    # As SGLang's hunyuan detector: a call section opened before ``</think>`` ends the
    # reasoning and is left in the content for the tool parser.
    exit_markers = ("<tool_calls>",)


class Ernie45ReasoningParser(ReasoningParser):
    """ERNIE-4.5-Thinking: no opening tag in the output; ``<response>`` wrapper removed."""

    implicit_open = True
    content_wrappers = ("<response>", "</response>")


class GraniteReasoningParser(ReasoningParser):
    """Granite 3.2 plain-text markers (both spellings) and Granite 3.3 tags."""

    open_tags = ("Here is my thought process:", "Here's my thought process:", "<think>")
    close_tags = ("Here is my response:", "Here's my response:", "</think>")
    content_wrappers = ("<response>", "</response>")
