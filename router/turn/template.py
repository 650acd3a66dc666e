"""Normalised chat messages → prompt tokens, through the model's own chat template.

A request's ``chat_template_kwargs`` reach the template as variables, but never the
rendering machinery: a request-supplied ``chat_template`` (arbitrary Jinja, run in the
router) is refused unless the operator allows it (as vLLM does, GHSA-6fvq-23cw-5628), and
keyword arguments of ``apply_chat_template`` itself (``tokenize``, ``return_dict``...) are
refused always. Rendering is bounded in time either way.

For a model whose prefix cache reuses only exact snapshot points (a hybrid or sliding-window
model), the prompt also carries its turn boundaries: where the system prompt and tools end
(sessions share it), and where the history ends before the generation prompt (the next turn
of an agent continues from there, without this turn's generation prompt).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from router.errors import InvalidRequestError, shown
from router.pool import ModelHandle
from router.turn.deadline import TimedOut, run_with_deadline

logger = logging.getLogger(__name__)

# Names the server passes itself, or that change what rendering returns rather than what the
# template sees.
_RESERVED_KWARGS = frozenset(inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters) - {"self", "kwargs", "chat_template"} | {"messages"}


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    tokens: list[int]
    # Token offsets where a later request is likely to branch (empty unless the model wants them).
    boundaries: tuple[int, ...] = ()


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

    def template(upto: int, generation_prompt: bool) -> str:
        return tokenizer.apply_chat_template(
            messages[:upto], tools=tools or None, add_generation_prompt=generation_prompt, tokenize=False, **template_kwargs)

    def render() -> RenderedPrompt:
        try:
            text = run_with_deadline(lambda: template(len(messages), True), timeout_s)
        except TimedOut:
            raise InvalidRequestError(f"The chat template did not finish rendering in {timeout_s:g}s.", param="messages") from None
        except (TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as exc:
            # raise_exception() in templates, and whatever else a template does with odd input
            raise InvalidRequestError(f"The chat template rejected these messages: {shown(str(exc), 300)}", param="messages") from None
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequestError("The chat template rendered these messages as an empty prompt.", param="messages")
        tokens = tokenizer.encode(text, add_special_tokens=False)
        boundaries = turn_boundaries(messages, text, tokens, template, tokenizer, timeout_s) if handle.wants_turn_boundaries else ()
        return RenderedPrompt(text, tokens, boundaries)

    return await anyio.to_thread.run_sync(render)


def turn_boundaries(messages: list[dict[str, Any]], text: str, tokens: list[int],
                     template: Callable[[int, bool], str], tokenizer: Any, timeout_s: float) -> tuple[int, ...]:
    """Token offsets of the prompt where the leading system messages end and where the history
    ends before the generation prompt, each where the template renders that part of the
    conversation as a prefix of the prompt, token for token (a boundary only helps there)."""
    system_end = next((i for i, message in enumerate(messages) if message.get("role") not in ("system", "developer")), len(messages))
    found = set()
    for upto in sorted({system_end, len(messages)} - {0}):
        try:
            part = run_with_deadline(lambda: template(upto, False), timeout_s)
        except Exception:  # a template may refuse a partial conversation; the prompt itself rendered
            logger.debug("no turn boundary after %d messages", upto, exc_info=True)
            continue
        if not isinstance(part, str) or not part or not text.startswith(part):
            continue
        part_tokens = tokenizer.encode(part, add_special_tokens=False)
        if 0 < len(part_tokens) < len(tokens) and tokens[: len(part_tokens)] == part_tokens:
            found.add(len(part_tokens))
    return tuple(sorted(found))


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
