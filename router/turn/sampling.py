"""API request fields → engine request: sampling defaults, limits and their 400s.

Shared by every API adapter so that a model's defaults and the context rules behave the
same on /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engines.protocol import SamplingParams, sampling_problem, token_problem
from router.errors import ContextLengthError, InvalidRequestError, shown
from router.pool import ModelHandle

_TOKEN_ID = re.compile(r"[0-9]{1,19}")
# OpenAI takes 4 stop strings; agents send a handful. These bounds keep one request's stops cheap.
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256
MAX_STOP_TOKEN_IDS = 64


@dataclass(frozen=True)
class SamplingInput:
    """The sampling fields an API request may set; None means "the model's default"."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    logit_bias: dict[str, float] | None = None
    top_logprobs: int | None = None


def sampling_input(body: Any, top_logprobs: int | None = None) -> SamplingInput:
    """The sampling fields of an OpenAI chat or completions body (same names on both)."""
    return SamplingInput(
        temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, min_p=body.min_p,
        repetition_penalty=body.repetition_penalty, presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty, seed=body.seed, logit_bias=body.logit_bias,
        top_logprobs=top_logprobs,
    )


def build_sampling(handle: ModelHandle, fields: SamplingInput) -> SamplingParams:
    """Fill the request's gaps from the model's config, then check the result against the
    model (its vocabulary bounds top_k, top_logprobs and logit_bias keys).

    The checks are the engine contract's own (``engines.protocol.sampling_problem``), which
    the worker applies again: a request that passes here never fails there.

    Raises:
        InvalidRequestError: a field out of range, not finite, or not a token of this model.
    """
    defaults = handle.config.sampling
    pick = lambda value, default: default if value is None else value  # noqa: E731
    params = SamplingParams(
        temperature=pick(fields.temperature, defaults.temperature),
        top_p=pick(fields.top_p, defaults.top_p),
        top_k=pick(fields.top_k, defaults.top_k),
        min_p=pick(fields.min_p, defaults.min_p),
        repetition_penalty=pick(fields.repetition_penalty, defaults.repetition_penalty),
        presence_penalty=pick(fields.presence_penalty, defaults.presence_penalty),
        frequency_penalty=pick(fields.frequency_penalty, defaults.frequency_penalty),
        seed=fields.seed,
        logit_bias=_logit_bias(fields.logit_bias),
        top_logprobs=fields.top_logprobs,
    )
    if (problem := sampling_problem(params, handle.vocab_size)) is not None:
        raise InvalidRequestError(problem[1], param=problem[0])
    return params


def _logit_bias(bias: dict[str, float] | None) -> dict[int, float] | None:
    """JSON object keys → token ids; whether they are this model's is ``sampling_problem``'s call."""
    if not bias:
        return None
    out: dict[int, float] = {}
    for key, value in bias.items():
        # ASCII digits only: str.isdigit() also accepts "²", and int() accepts "-1", " 1" and "1_0".
        if not _TOKEN_ID.fullmatch(key):
            raise InvalidRequestError(f"'logit_bias' key {shown(key)!r} is not a token id (a non-negative integer).", param="logit_bias")
        out[int(key)] = float(value)
    return out


def stop_token_ids(handle: ModelHandle, ids: list[int] | None) -> list[int]:
    """The request's extra stop token ids, each one of this model's tokens (and few: the
    worker builds a matcher over them on its engine thread)."""
    ids = list(dict.fromkeys(ids or []))
    if len(ids) > MAX_STOP_TOKEN_IDS:
        raise InvalidRequestError(f"'stop_token_ids' takes at most {MAX_STOP_TOKEN_IDS} token ids.", param="stop_token_ids")
    if (problem := token_problem(ids, handle.vocab_size, "stop_token_ids")) is not None:
        raise InvalidRequestError(problem[1], param=problem[0])
    return ids


def resolve_max_tokens(handle: ModelHandle, requested: int | None, prompt_tokens: int, *, param: str = "max_tokens", context_param: str = "messages") -> int:
    """Output cap: the request's (or the model default), clamped to the model's
    ``max_output_tokens`` ceiling (when set) and to the context left.

    Raises:
        InvalidRequestError: ``requested`` is below 1.
        ContextLengthError: the prompt alone fills the context.
    """
    if requested is not None and requested < 1:
        raise InvalidRequestError(f"'{param}' must be at least 1, got {requested}.", param=param)
    room = handle.max_context - prompt_tokens
    if room < 1:
        raise ContextLengthError(prompt_tokens, handle.max_context, param=context_param)
    wanted = handle.config.sampling.max_tokens if requested is None else requested
    ceiling = handle.config.max_output_tokens or wanted
    return min(wanted, ceiling, room)


def normalize_stop(stop: str | list[str] | None, *, param: str = "stop") -> list[str]:
    """Stop strings, bounded: the router matches every one of them against every token's text
    on its event loop, so thousands of long ones would slow every stream of every model."""
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else list(stop)
    if any(not isinstance(s, str) for s in stops):
        raise InvalidRequestError(f"'{param}' must be a string or a list of strings.", param=param)
    stops = list(dict.fromkeys(s for s in stops if s))
    if len(stops) > MAX_STOP_STRINGS or any(len(s) > MAX_STOP_CHARS for s in stops):
        raise InvalidRequestError(
            f"'{param}' takes at most {MAX_STOP_STRINGS} strings of at most {MAX_STOP_CHARS} characters.", param=param)
    return stops
