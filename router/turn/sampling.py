"""API request fields → engine request: sampling defaults, limits and their 400s.

Shared by every API adapter so that a model's defaults and the context rules behave the
same on /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engines.protocol import SamplingParams
from router.errors import ContextLengthError, InvalidRequestError
from router.pool import ModelHandle

MAX_TOP_LOGPROBS = 20


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


def _check_range(name: str, value: float | None, low: float, high: float, *, low_open: bool = False) -> None:
    if value is None:
        return
    if value < low or value > high or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise InvalidRequestError(f"'{name}' must be in {bound}, got {value}.", param=name)


def build_sampling(handle: ModelHandle, fields: SamplingInput) -> SamplingParams:
    """Validate the request's sampling fields and fill the gaps from the model's config."""
    _check_range("temperature", fields.temperature, 0.0, 2.0)
    _check_range("top_p", fields.top_p, 0.0, 1.0, low_open=True)
    _check_range("min_p", fields.min_p, 0.0, 1.0)
    _check_range("presence_penalty", fields.presence_penalty, -2.0, 2.0)
    _check_range("frequency_penalty", fields.frequency_penalty, -2.0, 2.0)
    if fields.top_k is not None and fields.top_k < 0:
        raise InvalidRequestError(f"'top_k' must be >= 0, got {fields.top_k}.", param="top_k")
    if fields.repetition_penalty is not None and fields.repetition_penalty <= 0:
        raise InvalidRequestError("'repetition_penalty' must be > 0.", param="repetition_penalty")
    if fields.top_logprobs is not None and not 0 <= fields.top_logprobs <= MAX_TOP_LOGPROBS:
        raise InvalidRequestError(f"'top_logprobs' must be between 0 and {MAX_TOP_LOGPROBS}.", param="top_logprobs")
    defaults = handle.config.sampling
    pick = lambda value, default: default if value is None else value  # noqa: E731
    return SamplingParams(
        temperature=pick(fields.temperature, defaults.temperature),
        top_p=pick(fields.top_p, defaults.top_p),
        top_k=pick(fields.top_k, defaults.top_k),
        min_p=pick(fields.min_p, defaults.min_p),
        repetition_penalty=pick(fields.repetition_penalty, defaults.repetition_penalty),
        presence_penalty=pick(fields.presence_penalty, defaults.presence_penalty),
        frequency_penalty=pick(fields.frequency_penalty, defaults.frequency_penalty),
        seed=fields.seed,
        logit_bias=_logit_bias(fields.logit_bias, handle),
        top_logprobs=fields.top_logprobs,
    )


def _logit_bias(bias: dict[str, float] | None, handle: ModelHandle) -> dict[int, float] | None:
    if not bias:
        return None
    vocab_size = len(handle.tokenizer.get_vocab())
    out: dict[int, float] = {}
    for key, value in bias.items():
        if not key.lstrip("-").isdigit() or not 0 <= int(key) < vocab_size:
            raise InvalidRequestError(f"'logit_bias' key {key!r} is not a token id of this model.", param="logit_bias")
        if not -100 <= value <= 100:
            raise InvalidRequestError("'logit_bias' values must be between -100 and 100.", param="logit_bias")
        out[int(key)] = float(value)
    return out


def resolve_max_tokens(handle: ModelHandle, requested: int | None, prompt_tokens: int, *, param: str = "max_tokens", context_param: str = "messages") -> int:
    """Output cap: the request's (or the model default), clamped to the context left.

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
    return min(wanted, room)


def normalize_stop(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else list(stop)
    if any(not isinstance(s, str) for s in stops):
        raise InvalidRequestError("'stop' must be a string or a list of strings.", param="stop")
    return [s for s in stops if s]
