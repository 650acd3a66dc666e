"""Per-request samplers and logits processors for mlx-lm's BatchGenerator.

Greedy requests share one sampler object so that BatchGenerator samples the whole batch
in a single call; anything else gets its own sampler and is sampled row by row, inside a
``RowGuard`` that pins an exception raised while building one row's graph on that request.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p, greedy_sampler, make_logits_processors

from engines.protocol import SamplingParams

logger = logging.getLogger(__name__)

Sampler = Callable[[mx.array], mx.array]
LogitsProcessor = Callable[[mx.array, mx.array], mx.array]

# How many recent tokens the penalties look at (OpenAI's penalties see the whole output;
# a window keeps the per-step cost bounded on long generations).
PENALTY_CONTEXT_TOKENS = 256


def reset_random_state() -> None:
    """Give the process a fresh, concrete PRNG state.

    mlx-lm's samplers are ``mx.compile``d with ``mx.random.state`` as input and output; one
    that raises while tracing leaves a placeholder in that state, and every later random op
    in the process then fails ("eval an array without a primitive").
    """
    mx.random.seed(int.from_bytes(os.urandom(8), "little"))


def make_sampler(params: SamplingParams, vocab_size: int) -> Sampler:
    """Build the sampler for one request (already checked by ``protocol.sampling_problem``).

    A ``seed`` gives the request its own PRNG key, split once per step, so its output is
    reproducible whatever else shares the batch. ``top_k`` equal to the vocabulary keeps
    every token, so it is no filter at all (mlx-lm's own top-k rejects it).
    """
    if params.temperature <= 0.0:
        return greedy_sampler
    filters: list[Callable[[mx.array], mx.array]] = []
    if 0.0 < params.top_p < 1.0:
        filters.append(lambda x: apply_top_p(x, params.top_p))
    if params.min_p > 0.0:
        filters.append(lambda x: apply_min_p(x, params.min_p, 1))
    if 0 < params.top_k < vocab_size:
        filters.append(lambda x: apply_top_k(x, params.top_k))
    inverse_temperature = 1.0 / params.temperature
    # A negative 64-bit seed names the same key as its two's complement (mx.random.key takes uint64).
    key = mx.random.key(params.seed % 2**64) if params.seed is not None else None

    def sample(logprobs: mx.array) -> mx.array:
        nonlocal key
        for apply_filter in filters:
            logprobs = apply_filter(logprobs)
        if key is None:
            return mx.random.categorical(logprobs * inverse_temperature)
        key, step_key = mx.random.split(key)
        return mx.random.categorical(logprobs * inverse_temperature, key=step_key)

    return sample


def make_processors(params: SamplingParams, prompt_tokens: int) -> list[LogitsProcessor]:
    """Penalties and logit bias; an empty list keeps the request on the fast path.

    A processor is handed the sequence so far, prompt first. ``presence_penalty`` and
    ``frequency_penalty`` count only the tokens sampled after the ``prompt_tokens``, as OpenAI
    defines them and vLLM applies them: an agent's reply must be free to repeat the names in
    its prompt. ``repetition_penalty`` sees the prompt too, as in vLLM and Hugging Face.
    """
    processors = make_logits_processors(
        logit_bias=params.logit_bias or None,
        repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1.0 else None,
        repetition_context_size=PENALTY_CONTEXT_TOKENS,
    )
    output_penalties = make_logits_processors(
        presence_penalty=params.presence_penalty or None,
        presence_context_size=PENALTY_CONTEXT_TOKENS,
        frequency_penalty=params.frequency_penalty or None,
        frequency_context_size=PENALTY_CONTEXT_TOKENS,
    )
    return processors + [_after_prompt(penalty, prompt_tokens) for penalty in output_penalties]


def _after_prompt(processor: LogitsProcessor, prompt_tokens: int) -> LogitsProcessor:
    def process(tokens: mx.array, logits: mx.array) -> mx.array:
        return processor(tokens[prompt_tokens:], logits)

    return process


class RowGuard:
    """One request's sampler and logits processors, with any exception they raise caught.

    BatchGenerator builds each step's graph row by row, so an exception raised in one row's
    sampler or processor belongs to that request. The guard records it, restores the PRNG
    state the failure may have poisoned, and lets the step finish with a harmless stand-in
    (the greedy token, the logits unchanged); the scheduler then fails just this request.
    """

    def __init__(self, sampler: Sampler, processors: list[LogitsProcessor]) -> None:
        self._sampler = sampler
        self._processors = processors
        self.error: BaseException | None = None

    @property
    def sampler(self) -> Sampler:
        return self._sample if self._sampler is not greedy_sampler else greedy_sampler

    @property
    def processors(self) -> list[LogitsProcessor]:
        return [self._guarded(processor) for processor in self._processors]

    def _sample(self, logprobs: mx.array) -> mx.array:
        if self.error is None:
            try:
                return self._sampler(logprobs)
            except Exception as exc:  # one row of a batched step: attribute it, keep the batch going
                self._fail(exc)
        return greedy_sampler(logprobs)

    def _guarded(self, processor: LogitsProcessor) -> LogitsProcessor:
        def process(context: mx.array, logits: mx.array) -> mx.array:
            if self.error is None:
                try:
                    return processor(context, logits)
                except Exception as exc:  # as in _sample
                    self._fail(exc)
            return logits

        return process

    def _fail(self, exc: Exception) -> None:
        logger.error("a request's sampler failed; failing that request alone", exc_info=exc)
        self.error = exc
        reset_random_state()
