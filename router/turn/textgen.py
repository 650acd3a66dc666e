"""From token ids to text: one engine request seen as a stream of text deltas.

Runs in the router for every request: incremental detokenisation (mlx-lm's streaming
detokenizers hold back incomplete UTF-8), stop strings (a match aborts the request in the
worker) and token log-probabilities with their text.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from engines.errors import EngineRequestError
from engines.protocol import AddRequest, ErrorKind, FinishReason, SamplingParams, TokenLogprob
from router.errors import ModelUnavailableError
from router.http.request_id import arrived_at
from router.ops.auth.guard import current_key
from router.ops.metrics.requests import GenerationTimes, observe_generation
from router.pool import LOAD_WAIT_S, ModelHandle
from router.turn.stops import StopStringMatcher

_FINISH_TEXT = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length", FinishReason.ABORT: "abort"}


@dataclass(frozen=True)
class TokenChoice:
    token: str
    logprob: float
    token_id: int


@dataclass(frozen=True)
class TokenInfo:
    """One generated token's log-probability, with alternatives when asked."""

    token: str
    logprob: float
    top: list[TokenChoice]


@dataclass(frozen=True)
class TextDelta:
    text: str
    logprobs: list[TokenInfo] = field(default_factory=list)
    finish_reason: str | None = None


@dataclass
class GenerationRequest:
    prompt_tokens: list[int]
    max_tokens: int
    sampling: SamplingParams
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    snapshot_at: tuple[int, ...] = ()  # the prompt's turn boundaries, for the worker's prefix cache
    grammar: str = ""  # llguidance grammar the output must follow (router.turn.structured); "" is free


class Generation:
    """One request's text stream; read usage counters after iterating."""

    def __init__(self, handle: ModelHandle, request: GenerationRequest) -> None:
        self.handle = handle
        self.request = request
        self.request_id = uuid.uuid4().hex
        self.prompt_tokens = len(request.prompt_tokens)
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None  # the stop string that ended the output, if one did
        self.times = GenerationTimes(arrived_at.get() or time.perf_counter())
        self._key = current_key.get()  # read here: the request's context, for the per-key counters

    async def stream(self) -> AsyncIterator[TextDelta]:
        """Yield text as it is decoded; the last delta carries ``finish_reason``.

        A delta with no text, no logprobs and no finish reason is a heartbeat: the engine has been
        silent for ``handle.heartbeat_s`` (a long prefill), and agents give up on silent
        connections (Codex's stream idle timeout, proxies).
        """
        tokenizer = self.handle.tokenizer
        add = AddRequest(
            self.request_id,
            self.request.prompt_tokens,
            self.request.max_tokens,
            self.request.sampling,
            sorted(set(tokenizer.eos_token_ids) | set(self.request.stop_token_ids)),
            self.request.snapshot_at,
            self.request.grammar,
        )
        handle = self.handle
        if not handle.serving:
            # A stream opened while its model loads: keepalives until the worker is ready.
            deadline = time.monotonic() + LOAD_WAIT_S
            while not await handle.wait_ready(handle.heartbeat_s):
                if time.monotonic() > deadline:
                    raise ModelUnavailableError(f"Model {handle.model_id!r} is still loading.", retry_after_s=10.0)
                yield TextDelta("")
        try:
            # aclosing: a client that goes away closes the inner stream now, which aborts the request.
            async with contextlib.aclosing(self._deltas(handle, add)) as deltas:
                async for delta in deltas:
                    yield delta
        finally:
            if self.finish_reason is not None and handle.metrics is not None:
                observe_generation(handle.metrics, handle.model_id, self._key.name if self._key else None, self.times,
                                   prompt_tokens=self.prompt_tokens, cached_tokens=self.cached_tokens,
                                   completion_tokens=self.completion_tokens, finish_reason=self.finish_reason)

    async def _deltas(self, handle: ModelHandle, add: AddRequest) -> AsyncIterator[TextDelta]:
        tokenizer = handle.tokenizer
        detokenizer = tokenizer.detokenizer
        stops = StopStringMatcher(self.request.stop)
        times = self.times
        async with contextlib.aclosing(handle.worker.generate(add, heartbeat_s=handle.heartbeat_s)) as batches:
            async for batch in batches:
                if not batch:
                    yield TextDelta("")
                    continue
                now = time.perf_counter()
                for delta in batch:
                    if delta.error is not None:
                        raise EngineRequestError(delta.error, invalid=delta.error_kind is ErrorKind.INVALID_REQUEST)
                    if delta.cached_tokens is not None:
                        self.cached_tokens = delta.cached_tokens
                        times.queued_s, times.prefill_s = delta.queued_s, delta.prefill_s
                    if delta.token_ids:
                        times.tokens_arrived(now, len(delta.token_ids))
                    self.completion_tokens += len(delta.token_ids)
                    for token in delta.token_ids:
                        detokenizer.add_token(token)
                    if delta.finish_reason is not None:
                        detokenizer.finalize()
                    text, matched = stops.feed(detokenizer.last_segment)
                    logprobs = self._logprob_infos(delta.logprobs)
                    if matched:
                        # Leaving the loop closes the worker stream, which aborts the request.
                        self.finish_reason, self.stop_sequence = "stop", stops.matched
                        yield TextDelta(text, logprobs, "stop")
                        return
                    if delta.finish_reason is not None:
                        rest, matched = stops.flush()
                        self.finish_reason = "stop" if matched else _FINISH_TEXT[delta.finish_reason]
                        self.stop_sequence = stops.matched
                        yield TextDelta(text + rest, logprobs, self.finish_reason)
                        return
                    if text or logprobs:
                        yield TextDelta(text, logprobs)

    def _logprob_infos(self, logprobs: list[TokenLogprob] | None) -> list[TokenInfo]:
        if not logprobs:
            return []
        text_of = self.handle.token_text
        return [
            TokenInfo(text_of(lp.token_id), lp.logprob, [TokenChoice(text_of(t.token_id), t.logprob, t.token_id) for t in lp.top])
            for lp in logprobs
        ]
