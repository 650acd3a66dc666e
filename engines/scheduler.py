"""Admission, abort and output collection around mlx-lm's BatchGenerator.

Every method runs on the worker's scheduler thread, the only thread that touches MLX.
One ``step()`` is one ``BatchGenerator.next()``: a decode step for every running sequence
plus at most one prefill chunk (``prefill_step`` tokens) for waiting prompts, so a long
prompt never stalls the running decodes for more than one chunk.

With a prefix cache, a request starts from the longest cached prefix of its prompt and only
the rest is prefilled. Snapshots go into the cache at the end of every prompt (the first
prompt segment's end, one token before the last) and at the end of every output (prompt
plus completion, which the next agent turn usually starts with). A request that shares a
long uncached prefix with one still prefilling waits for that one's end-of-prompt snapshot
instead of prefilling the same tokens again beside it (trimmable caches only: only they can
serve a prefix shorter than the snapshot).

Failures stay as small as they can be: a request the contract forbids is rejected at
``add`` (checked again here, whatever the router checked); an exception in one request's
sampler fails that request (``RowGuard``); a step that raises anywhere else fails every
request in flight, and ``rebuild`` starts a clean generator and proves it with a probe
generation, or raises ``EngineUnrecoverableError`` so the worker exits and is restarted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.generate import BatchGenerator, StopSequences
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache

from caches import snapshot
from caches.prefix_cache import PrefixCache, PrefixHit
from caches.radix import common_prefix

from engines.errors import EngineUnrecoverableError
from engines.protocol import (
    AddRequest,
    ErrorKind,
    FinishReason,
    PrefixCacheCounters,
    SamplingParams,
    StepOutputs,
    TokenDelta,
    TokenLogprob,
    TopLogprob,
    WorkerStatus,
    sampling_problem,
    token_problem,
)
from engines.sampling import RowGuard, make_processors, make_sampler, reset_random_state

logger = logging.getLogger(__name__)

_FINISH_REASONS = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}
# What clients are told when the engine, not their request, failed (the details go to the log).
ENGINE_FAILED = "the engine failed while generating this request"
_PROBE_STEPS = 8
# A request waits for another's prefill only to save at least this many prompt tokens.
SHARE_MIN_TOKENS = 128


@dataclass
class _Sequence:
    request_id: str
    top_logprobs: int | None
    cached_tokens: int
    guard: RowGuard
    prompt: list[int]
    hit: PrefixHit | None = None  # the cache entry it started from, pinned while it runs
    prefilled: bool = False  # its end-of-prompt snapshot was taken (or it needed none)
    announced: bool = False  # whether cached_tokens went out with a delta yet


@dataclass
class _Held:
    """A request waiting for a prefilling sequence's snapshot of the prefix they share."""

    request: AddRequest
    leader_uid: int
    covered: int  # prompt tokens the cache served before it waited


def model_vocab_size(model) -> int:
    """Rows of the model's logits (its config's vocab_size; tokenizers may have fewer)."""
    size = getattr(getattr(model, "args", None), "vocab_size", None)
    if not isinstance(size, int) or size < 2:
        raise ValueError("cannot tell the model's vocabulary size (model.args.vocab_size)")
    return size


class Scheduler:
    """Continuous batching for one model: requests join the running batch at the next step."""

    def __init__(self, model, *, max_concurrency: int, prefill_step: int, max_context: int,
                 prefix_cache: PrefixCache | None = None) -> None:
        self._model = model
        self._max_context = max_context
        self.vocab_size = model_vocab_size(model)
        self._max_concurrency = max_concurrency
        self._prefill_step = prefill_step
        self._generator = self._new_generator()
        self._by_uid: dict[int, _Sequence] = {}
        self._uid_by_request: dict[str, int] = {}
        self._rejected: list[TokenDelta] = []
        self.prefix_cache = prefix_cache
        self._held: dict[str, _Held] = {}
        # Sharing an in-flight prefill needs a snapshot that can be cut back to the shared part
        # at any length (a sliding window stops rewinding once a prompt is longer than it).
        layers = make_prompt_cache(model)
        self._can_share = (prefix_cache is not None and snapshot.is_trimmable(layers)
                           and not any(isinstance(layer, RotatingKVCache) for layer in layers))
        self.shared_prefill_tokens = 0  # prompt tokens served from a snapshot a held request waited for

    def _new_generator(self) -> BatchGenerator:
        return BatchGenerator(
            self._model,
            completion_batch_size=self._max_concurrency,
            # Prompts prefill together in chunks; more than a few at once only delays first tokens.
            prefill_batch_size=min(self._max_concurrency, 8),
            prefill_step_size=self._prefill_step,
        )

    # ------------------------------------------------------------------ public API

    @property
    def has_work(self) -> bool:
        return bool(self._by_uid or self._rejected or self._held)

    def add(self, request: AddRequest) -> None:
        """Queue a request; it joins the batch at the next step. Bad requests fail, never raise."""
        error = self._validate(request)
        if error is not None:
            self._reject(request.request_id, error, ErrorKind.INVALID_REQUEST)
            return
        if self._can_share:
            covered = self.prefix_cache.longest(request.prompt_tokens)
            leader = self._leader_for(request.prompt_tokens, covered)
            if leader is not None:  # looked up once the leader's snapshot is in
                self._held[request.request_id] = _Held(request, leader, covered)
                return
        self._admit(request, self.prefix_cache.lookup(request.prompt_tokens) if self.prefix_cache is not None else None)

    def abort(self, request_ids: list[str]) -> None:
        """Free the slots of these requests now; their KV memory goes with them."""
        for request_id in [rid for rid in request_ids if rid in self._held]:
            del self._held[request_id]
            self._rejected.append(TokenDelta(request_id, [], FinishReason.ABORT))
        for uid in self._release([rid for rid in request_ids if rid in self._uid_by_request]):
            self._rejected.append(TokenDelta(self._end(uid).request_id, [], FinishReason.ABORT))

    def step(self) -> StepOutputs:
        """Run one engine step and collect what every sequence produced."""
        outputs: list[TokenDelta] = []
        if self._by_uid:
            prompt_responses, responses = self._generator.next()
            for response in prompt_responses:
                if response.end_of_segment and not response.end_of_prompt:
                    self._snapshot_prompt(response.uid)
            failed = {uid for uid, sequence in self._by_uid.items() if sequence.guard.error is not None}
            outputs.extend(self._collect(response) for response in responses if response.uid not in failed)
            outputs.extend(self._fail_guarded(failed))
        # Rejections and aborts since the last step, and requests that waited for a prefill and failed to start.
        outputs.extend(self._rejected)
        self._rejected = []
        return StepOutputs(outputs)

    def status(self) -> WorkerStatus:
        """How busy the engine is and how well its prefix cache serves."""
        counters = None
        if self.prefix_cache is not None:
            stats = self.prefix_cache.stats
            counters = PrefixCacheCounters(
                stats.lookups, stats.hits, stats.lookup_tokens, stats.hit_tokens, stats.stored, stats.evictions,
                stats.entries, stats.bytes, self.prefix_cache.memory_bytes, self.shared_prefill_tokens)
        return WorkerStatus(running=len(self._by_uid), waiting=len(self._held), prefix_cache=counters)

    def fail_all(self) -> StepOutputs:
        """After a step that raised: fail every request in flight (call ``rebuild`` next)."""
        outputs = [_engine_failure(s.request_id) for s in self._by_uid.values()]
        outputs += [_engine_failure(request_id) for request_id in self._held]
        for sequence in self._by_uid.values():
            self._unpin(sequence)
        self._by_uid.clear()
        self._uid_by_request.clear()
        self._held.clear()
        return StepOutputs(outputs)

    def rebuild(self) -> None:
        """Replace the generator with a clean one, after proving a probe generation works.

        Raises:
            EngineUnrecoverableError: the probe failed too; the process must be replaced.
        """
        try:
            self._generator.close()
        except Exception:  # the old generator is being thrown away; its state is suspect anyway
            logger.warning("closing the failed generator raised", exc_info=True)
        reset_random_state()
        try:
            self._probe()
        except Exception as exc:
            raise EngineUnrecoverableError(f"a probe generation failed after the engine was reset: {type(exc).__name__}") from exc
        self._generator = self._new_generator()

    def close(self) -> None:
        self._generator.close()

    # ------------------------------------------------------------------ internal

    def _validate(self, request: AddRequest) -> str | None:
        if request.request_id in self._uid_by_request or request.request_id in self._held:
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
        problem = (
            sampling_problem(request.sampling, self.vocab_size)
            or token_problem(request.prompt_tokens, self.vocab_size, "prompt")
            or token_problem(request.stop_token_ids, self.vocab_size, "stop_token_ids")
        )
        return problem[1] if problem else None

    def _admit(self, request: AddRequest, hit: PrefixHit | None) -> None:
        """Insert into the generator, starting from ``hit`` if the cache had a prefix."""
        prompt = list(request.prompt_tokens)
        start = hit.length if hit is not None else 0
        try:
            guard = RowGuard(make_sampler(request.sampling, self.vocab_size), make_processors(request.sampling))
            (uid,) = self._generator.insert(
                [prompt[start:]],
                max_tokens=[request.max_tokens],
                caches=[hit.layers if hit is not None else None],
                # A fresh list: the generator appends to it as it prefills.
                all_tokens=[prompt[:start]],
                samplers=[guard.sampler],
                logits_processors=[guard.processors],
                stop_sequences=[StopSequences([[token] for token in request.stop_token_ids])],
            )
        except Exception:  # one request's admission; the batch is untouched
            logger.error("could not admit request %s", request.request_id, exc_info=True)
            if hit is not None:
                self.prefix_cache.release(hit)
            reset_random_state()
            self._reject(request.request_id, ENGINE_FAILED, ErrorKind.ENGINE)
            return
        # Only the last token left: the whole prompt but it was cached, nothing new to snapshot.
        self._by_uid[uid] = _Sequence(request.request_id, request.sampling.top_logprobs, cached_tokens=start, guard=guard,
                                      prompt=prompt, hit=hit, prefilled=len(prompt) - start <= 1)
        self._uid_by_request[request.request_id] = uid

    def _leader_for(self, prompt: list[int], covered: int) -> int | None:
        """A still-prefilling sequence whose prompt shares a long uncached prefix with ``prompt``."""
        best, best_shared = None, covered + SHARE_MIN_TOKENS - 1
        for uid, sequence in self._by_uid.items():
            if sequence.prefilled:
                continue
            shared = common_prefix(prompt, sequence.prompt)
            if shared > best_shared:
                best, best_shared = uid, shared
        return best

    def _snapshot_prompt(self, uid: int) -> None:
        """Cache the sequence's prompt (all but its last token), then admit who waited for it."""
        sequence = self._by_uid.get(uid)
        if sequence is None or sequence.prefilled:
            return
        sequence.prefilled = True
        if self.prefix_cache is not None:
            layers, tokens = self._generator.extract_cache([uid])[uid]
            self.prefix_cache.store(list(tokens), layers)
        self._admit_followers(uid)

    def _admit_followers(self, leader_uid: int) -> None:
        for request_id in [rid for rid, held in self._held.items() if held.leader_uid == leader_uid]:
            held = self._held.pop(request_id)
            hit = self.prefix_cache.lookup(held.request.prompt_tokens)
            self.shared_prefill_tokens += max(0, (hit.length if hit else 0) - held.covered)
            self._admit(held.request, hit)

    def _end(self, uid: int) -> _Sequence:
        """Forget a sequence that has left the generator: unpin its cache entry, free who waited on it."""
        sequence = self._by_uid.pop(uid)
        self._unpin(sequence)
        self._admit_followers(uid)
        return sequence

    def _unpin(self, sequence: _Sequence) -> None:
        if sequence.hit is not None:
            self.prefix_cache.release(sequence.hit)
            sequence.hit = None

    def _reject(self, request_id: str, message: str, kind: ErrorKind) -> None:
        logger.warning("rejected request %s: %s", request_id, message)
        self._rejected.append(TokenDelta(request_id, [], FinishReason.ERROR, error=message, error_kind=kind))

    def _release(self, request_ids: list[str]) -> list[int]:
        """Take these requests out of the generator; returns their uids (still in ``_by_uid``)."""
        uids = [self._uid_by_request.pop(rid) for rid in request_ids]
        if uids:
            self._generator.remove(uids)
        return uids

    def _fail_guarded(self, uids: set[int]) -> list[TokenDelta]:
        """Fail the requests whose sampler raised this step; the rest of the batch goes on."""
        self._release([self._by_uid[uid].request_id for uid in uids])
        return [_engine_failure(self._end(uid).request_id) for uid in uids]

    def _probe(self) -> None:
        """Generate two sampled tokens on a throwaway generator: the forward pass and the PRNG work."""
        generator = self._new_generator()
        try:
            sampler = make_sampler(SamplingParams(temperature=1.0), self.vocab_size)
            generator.insert([[0, 1]], max_tokens=[2], samplers=[sampler], stop_sequences=[StopSequences([])])
            for _ in range(_PROBE_STEPS):
                _, responses = generator.next()
                if any(response.finish_reason for response in responses):
                    return
            raise RuntimeError(f"the probe did not finish in {_PROBE_STEPS} steps")
        finally:
            generator.close()

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
            if self.prefix_cache is not None:
                # Prompt and output as fed: the next turn of an agent usually starts with all of it.
                self.prefix_cache.store(list(response.all_tokens), response.prompt_cache)
            del self._uid_by_request[sequence.request_id]
            self._end(response.uid)
        return TokenDelta(sequence.request_id, emitted, finish, logprobs, cached)


def _engine_failure(request_id: str) -> TokenDelta:
    return TokenDelta(request_id, [], FinishReason.ERROR, error=ENGINE_FAILED, error_kind=ErrorKind.ENGINE)


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
