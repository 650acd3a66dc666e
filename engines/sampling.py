"""Per-request samplers and logits processors for mlx-lm's BatchGenerator.

Greedy requests share one sampler object so that BatchGenerator samples the whole batch
in a single call; anything else gets its own sampler and is sampled row by row.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p, greedy_sampler, make_logits_processors

from engines.protocol import SamplingParams

Sampler = Callable[[mx.array], mx.array]
LogitsProcessor = Callable[[mx.array, mx.array], mx.array]

# How many recent tokens the penalties look at (OpenAI's penalties see the whole output;
# a window keeps the per-step cost bounded on long generations).
PENALTY_CONTEXT_TOKENS = 256


def make_sampler(params: SamplingParams) -> Sampler:
    """Build the sampler for one request.

    A ``seed`` gives the request its own PRNG key, split once per step, so its output is
    reproducible whatever else shares the batch.
    """
    if params.temperature <= 0.0:
        return greedy_sampler
    filters: list[Callable[[mx.array], mx.array]] = []
    if 0.0 < params.top_p < 1.0:
        filters.append(lambda x: apply_top_p(x, params.top_p))
    if params.min_p > 0.0:
        filters.append(lambda x: apply_min_p(x, params.min_p, 1))
    if params.top_k > 0:
        filters.append(lambda x: apply_top_k(x, params.top_k))
    inverse_temperature = 1.0 / params.temperature
    key = mx.random.key(params.seed) if params.seed is not None else None

    def sample(logprobs: mx.array) -> mx.array:
        nonlocal key
        for apply_filter in filters:
            logprobs = apply_filter(logprobs)
        if key is None:
            return mx.random.categorical(logprobs * inverse_temperature)
        key, step_key = mx.random.split(key)
        return mx.random.categorical(logprobs * inverse_temperature, key=step_key)

    return sample


def make_processors(params: SamplingParams) -> list[LogitsProcessor]:
    """Penalties and logit bias; an empty list keeps the request on the fast path."""
    return make_logits_processors(
        logit_bias=params.logit_bias or None,
        repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1.0 else None,
        repetition_context_size=PENALTY_CONTEXT_TOKENS,
        presence_penalty=params.presence_penalty or None,
        presence_context_size=PENALTY_CONTEXT_TOKENS,
        frequency_penalty=params.frequency_penalty or None,
        frequency_context_size=PENALTY_CONTEXT_TOKENS,
    )
