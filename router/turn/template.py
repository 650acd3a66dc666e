"""Normalised chat messages → prompt tokens, through the model's own chat template.

A request's ``chat_template_kwargs`` reach the template as variables, but never the
rendering machinery: a request-supplied ``chat_template`` (arbitrary Jinja, run in the
router) is refused unless the operator allows it (as vLLM does, GHSA-6fvq-23cw-5628), and
keyword arguments of ``apply_chat_template`` itself (``tokenize``, ``return_dict``...) are
refused always. Rendering is bounded in time either way.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import anyio
from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from router.errors import InvalidRequestError, shown
from router.pool import ModelHandle
from router.turn.deadline import TimedOut, run_with_deadline

# Names the server passes itself, or that change what rendering returns rather than what the
# template sees.
_RESERVED_KWARGS = frozenset(inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters) - {"self", "kwargs", "chat_template"} | {"messages"}


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    tokens: list[int]


async def render_chat(
    handle: ModelHandle,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    request_kwargs: dict[str, Any],
) -> RenderedPrompt:
    """Apply the model's chat template and tokenise, off the event loop.

    Args:
        request_kwargs: The request's ``chat_template_kwargs`` (over the model's configured ones).

    Raises:
        InvalidRequestError: a refused kwarg, a template that rejects the messages, runs past
            ``[server] chat_template_timeout_s`` or renders an empty prompt.
    """
    tokenizer = handle.tokenizer
    if not tokenizer.has_chat_template:
        raise InvalidRequestError(f"Model {handle.model_id!r} has no chat template; use /v1/completions.", param="messages")
    template_kwargs = {**handle.config.chat_template_kwargs, **_checked_kwargs(request_kwargs, handle.allow_request_chat_template)}
    timeout_s = handle.chat_template_timeout_s

    def render() -> RenderedPrompt:
        try:
            text = run_with_deadline(lambda: tokenizer.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=True, tokenize=False, **template_kwargs), timeout_s)
        except TimedOut:
            raise InvalidRequestError(f"The chat template did not finish rendering in {timeout_s:g}s.", param="messages") from None
        except (TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as exc:
            # raise_exception() in templates, and whatever else a template does with odd input
            raise InvalidRequestError(f"The chat template rejected these messages: {shown(str(exc), 300)}", param="messages") from None
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequestError("The chat template rendered these messages as an empty prompt.", param="messages")
        return RenderedPrompt(text, tokenizer.encode(text, add_special_tokens=False))

    return await anyio.to_thread.run_sync(render)


def _checked_kwargs(kwargs: dict[str, Any], allow_template: bool) -> dict[str, Any]:
    for key in kwargs:
        if key == "chat_template" and not allow_template:
            raise InvalidRequestError(
                "A request may not replace the chat template (the operator can allow it with "
                "[server] allow_request_chat_template = true).", param="chat_template_kwargs.chat_template")
        if key in _RESERVED_KWARGS:
            raise InvalidRequestError(f"chat_template_kwargs may not set {shown(key)!r}; the server sets it.",
                                      param=f"chat_template_kwargs.{shown(key)}")
    return kwargs


async def tokenize_text(handle: ModelHandle, text: str) -> list[int]:
    """Tokenise a raw completion prompt (with the tokenizer's BOS, as a plain prompt expects)."""
    return await anyio.to_thread.run_sync(lambda: handle.tokenizer.encode(text))
