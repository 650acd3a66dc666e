"""Turn boundaries for models whose prefix cache reuses only exact snapshot points.

A real tokenizer and chat template (the tiny qwen3 checkpoint's ChatML with tools): each
boundary must be where that part of the conversation ends in the prompt, token for token.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlx_lm.tokenizer_utils import load

from router.turn.template import turn_boundaries

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
MESSAGES = [
    {"role": "system", "content": "You are a coding agent. Keep answers short."},
    {"role": "user", "content": "What is in the README?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "README.md"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "# rapid-mlx\nA router for MLX models."},
]


@pytest.fixture(scope="module")
def tokenizer(tiny_models):
    return load(Path(tiny_models.path("qwen3")))


def _boundaries(tokenizer, messages, *, refuse=lambda upto: False, **kwargs):
    def template(upto: int, generation_prompt: bool) -> str:
        if refuse(upto):
            raise ValueError("this template wants a user message")
        return tokenizer.apply_chat_template(messages[:upto], tools=TOOLS, add_generation_prompt=generation_prompt,
                                             tokenize=False, **kwargs)

    text = template(len(messages), True)
    tokens = tokenizer.encode(text, add_special_tokens=False)
    return text, tokens, template, turn_boundaries(messages, text, tokens, template, tokenizer, timeout_s=10)


def _length(tokenizer, template, upto: int) -> int:
    return len(tokenizer.encode(template(upto, False), add_special_tokens=False))


@pytest.mark.parametrize("thinking", [True, False])
def test_the_system_prompt_and_the_history_end_at_the_boundaries(tokenizer, thinking):
    text, tokens, template, found = _boundaries(tokenizer, MESSAGES, enable_thinking=thinking)
    assert found == (_length(tokenizer, template, 1), _length(tokenizer, template, len(MESSAGES)))
    system_end, history_end = found
    assert tokenizer.decode(tokens[:system_end]).endswith("<|im_end|>\n") and "What is in" not in tokenizer.decode(tokens[:system_end])
    # Only the generation prompt is past the history's end.
    assert tokenizer.decode(tokens[history_end:]).startswith("<|im_start|>assistant")


def test_the_next_turn_starts_with_the_history_before_this_generation_prompt(tokenizer):
    _, _, _, (_, history_end) = _boundaries(tokenizer, MESSAGES, enable_thinking=False)
    following = MESSAGES + [{"role": "assistant", "content": "It names the project."}, {"role": "user", "content": "Thanks."}]
    next_text = tokenizer.apply_chat_template(following, tools=TOOLS, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    this_text = tokenizer.apply_chat_template(MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    next_tokens = tokenizer.encode(next_text, add_special_tokens=False)
    this_tokens = tokenizer.encode(this_text, add_special_tokens=False)
    assert next_tokens[:history_end] == this_tokens[:history_end]
    assert next_tokens[: len(this_tokens) - 1] != this_tokens[:-1]  # this prompt's end is off the next turn's path


def test_a_template_that_refuses_a_partial_conversation_loses_only_that_boundary(tokenizer):
    text, tokens, template, found = _boundaries(tokenizer, MESSAGES, refuse=lambda upto: upto == 1)
    assert found == (_length(tokenizer, template, len(MESSAGES)),)


def test_no_boundary_without_a_system_prompt_or_where_the_text_is_no_prefix(tokenizer):
    messages = MESSAGES[1:]
    text, tokens, template, found = _boundaries(tokenizer, messages)
    assert found == (_length(tokenizer, template, len(messages)),)  # no system part: only the history's end
    # A template that renders a partial conversation differently from the whole gives nothing.
    other = turn_boundaries(messages, text, tokens, lambda upto, g: "unrelated text", tokenizer, timeout_s=10)
    assert other == ()
