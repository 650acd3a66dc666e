"""Admission, abort and output collection around mlx-lm's BatchGenerator.

Every method runs on the worker's scheduler thread, the only thread that touches MLX.
One ``step()`` is one ``BatchGenerator.next()``: a decode step for every running sequence
plus at most one prefill chunk (``prefill_step`` tokens) for waiting prompts, so a long
prompt never stalls the running decodes for more than one chunk.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.generate import BatchGenerator, StopSequences

from engines.protocol import (
    AddRequest,
    FinishReason,
    StepOutputs,
    TokenDelta,
    TokenLogprob,
    TopLogprob,
)
from engines.sampling import make_processors, make_sampler

logger = logging.getLogger(__name__)

_FINISH_REASONS = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}


@dataclass
class _Sequence:
    request_id: str
    top_logprobs: int | None
    cached_tokens: int
    announced: bool = False  # whether cached_tokens went out with a delta yet


class Scheduler:
    """Continuous batching for one model: requests join the running batch at the next step."""

    def __init__(self, model, *, max_concurrency: int, prefill_step: int, max_context: int) -> None:
        self._model = model
        self._max_context = max_context
        self._generator = self._new_generator(max_concurrency, prefill_step)
        self._max_concurrency = max_concurrency
        self._prefill_step = prefill_step
        self._by_uid: dict[int, _Sequence] = {}
        self._uid_by_request: dict[str, int] = {}
        self._rejected: list[TokenDelta] = []

    def _new_generator(self, max_concurrency: int, prefill_step: int) -> BatchGenerator:
        return BatchGenerator(
            self._model,
            completion_batch_size=max_concurrency,
            # Prompts prefill together in chunks; more than a few at once only delays first tokens.
            prefill_batch_size=min(max_concurrency, 8),
            prefill_step_size=prefill_step,
        )

    # ------------------------------------------------------------------ public API

    @property
    def has_work(self) -> bool:
        return bool(self._by_uid or self._rejected)

    def add(self, request: AddRequest) -> None:
        """Queue a request; it joins the batch at the next step. Bad requests fail, never raise."""
        error = self._validate(request)
        if error is not None:
            self._reject(request.request_id, error)
            return
        stops = StopSequences([[token] for token in request.stop_token_ids])
        (uid,) = self._generator.insert(
            [list(request.prompt_tokens)],
            max_tokens=[request.max_tokens],
            samplers=[make_sampler(request.sampling)],
            logits_processors=[make_processors(request.sampling)],
            stop_sequences=[stops],
        )
        self._by_uid[uid] = _Sequence(request.request_id, request.sampling.top_logprobs, cached_tokens=0)
        self._uid_by_request[request.request_id] = uid

    def abort(self, request_ids: list[str]) -> None:
        """Free the slots of these requests now; their KV memory goes with them."""
        uids = [self._uid_by_request.pop(rid) for rid in request_ids if rid in self._uid_by_request]
        if uids:
            self._generator.remove(uids)
            for uid in uids:
                sequence = self._by_uid.pop(uid)
                self._rejected.append(TokenDelta(sequence.request_id, [], FinishReason.ABORT))

    def step(self) -> StepOutputs:
        """Run one engine step and collect what every sequence produced."""
        outputs, self._rejected = self._rejected, []
        if self._by_uid:
            _, responses = self._generator.next()
            outputs.extend(self._collect(response) for response in responses)
        return StepOutputs(outputs)

    def fail_all(self, message: str) -> StepOutputs:
        """After an engine error: fail every request and start from a fresh generator."""
        outputs = [TokenDelta(s.request_id, [], FinishReason.ERROR, error=message) for s in self._by_uid.values()]
        self._by_uid.clear()
        self._uid_by_request.clear()
        self._generator.close()
        self._generator = self._new_generator(self._max_concurrency, self._prefill_step)
        return StepOutputs(outputs)

    def close(self) -> None:
        self._generator.close()

    # ------------------------------------------------------------------ internal

    def _validate(self, request: AddRequest) -> str | None:
        if request.request_id in self._uid_by_request:
            return f"duplicate request id {request.request_id}"
        if not request.prompt_tokens:
            return "the prompt is empty"
        if request.max_tokens < 1:
            return "max_tokens must be at least 1"
        if len(request.prompt_tokens) + request.max_tokens > self._max_context:
            return (
                f"prompt ({len(request.prompt_tokens)} tokens) plus max_tokens ({request.max_tokens}) "
                f"exceeds the context of {self._max_context} tokens"
            )
        return None

    def _reject(self, request_id: str, message: str) -> None:
        logger.warning("rejected request %s: %s", request_id, message)
        self._rejected.append(TokenDelta(request_id, [], FinishReason.ERROR, error=message))

    def _collect(self, response) -> TokenDelta:
        sequence = self._by_uid[response.uid]
        finish = _FINISH_REASONS.get(response.finish_reason) if response.finish_reason else None
        # On "stop" the token is the stop token itself: it ends the turn and is never shown.
        emitted = [] if finish is FinishReason.STOP else [response.token]
        logprobs = None
        if sequence.top_logprobs is not None and emitted:
            logprobs = [_token_logprob(response.token, response.logprobs, sequence.top_logprobs)]
        cached = None
        if not sequence.announced:
            sequence.announced, cached = True, sequence.cached_tokens
        if finish is not None:
            del self._by_uid[response.uid]
            del self._uid_by_request[sequence.request_id]
        return TokenDelta(sequence.request_id, emitted, finish, logprobs, cached)


def _token_logprob(token: int, logprobs: mx.array, top: int) -> TokenLogprob:
    """The sampled token's log-probability and, if asked, the ``top`` most likely tokens."""
    chosen = logprobs[token].item()
    alternatives: list[TopLogprob] = []
    if top > 0:
        ids = mx.argpartition(-logprobs, kth=top - 1)[:top]
        values = logprobs[ids]
        order = mx.argsort(-values)
        for token_id, value in zip(ids[order].tolist(), values[order].tolist()):
            alternatives.append(TopLogprob(int(token_id), float(value)))
    return TokenLogprob(token, float(chosen), alternatives)
