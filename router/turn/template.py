"""Normalised chat messages → prompt tokens, through the model's own chat template."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from jinja2 import TemplateError

from router.errors import InvalidRequestError
from router.pool import ModelHandle


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    tokens: list[int]


async def render_chat(
    handle: ModelHandle,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    template_kwargs: dict[str, Any],
) -> RenderedPrompt:
    """Apply the model's chat template and tokenise, off the event loop."""
    tokenizer = handle.tokenizer
    if not tokenizer.has_chat_template:
        raise InvalidRequestError(f"Model {handle.model_id!r} has no chat template; use /v1/completions.", param="messages")

    def render() -> RenderedPrompt:
        try:
            text = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True, tokenize=False, **template_kwargs)
        except (TemplateError, TypeError, ValueError, KeyError) as exc:  # incl. raise_exception() in templates
            raise InvalidRequestError(f"The chat template rejected these messages: {exc}", param="messages") from None
        return RenderedPrompt(text, tokenizer.encode(text, add_special_tokens=False))

    return await anyio.to_thread.run_sync(render)


async def tokenize_text(handle: ModelHandle, text: str) -> list[int]:
    """Tokenise a raw completion prompt (with the tokenizer's BOS, as a plain prompt expects)."""
    return await anyio.to_thread.run_sync(lambda: handle.tokenizer.encode(text))
