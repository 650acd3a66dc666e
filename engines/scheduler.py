"""Admission, abort and output collection around mlx-lm's BatchGenerator.

Every method runs on the worker's scheduler thread, the only thread that touches MLX.
One ``step()`` is one ``BatchGenerator.next()``: a decode step for every running sequence
plus one prefill chunk for waiting prompts. Requests queue here, not in the generator, and
are fed to it by ``engines.prefill_policy``: shortest remaining prefill first, and while
sequences decode, only as many prompt tokens per step as keep prefill to its share of the
step (chunks of at most ``prefill_step``), so a long prompt never stalls the running decodes.

With a prefix cache, a request starts from the longest cached prefix of its prompt and only
the rest is prefilled. Snapshots go into the cache at the end of every prompt (one token
before the last), at the end of every output (prompt plus completion, which the next agent
turn usually starts with) and, for models whose cache cannot rewind, at the offsets the
request names in ``snapshot_at`` (the chat turn's boundaries: the prompt is inserted as
segments that end there). A request that shares a long uncached prefix with one still
prefilling waits for that one's snapshot instead of prefilling the same tokens again beside
it: any snapshot at or past the shared part when the cache can rewind, else one that ends
exactly inside it. A request whose best prefix is on disk only (the cache's disk tier) waits
while a loader thread reads it back. With a quantized KV cache, prefill segments are also cut
at ``quantize_after``: a token's precision then depends on its position alone.

Failures stay as small as they can be: a request the contract forbids is rejected at
``add`` (checked again here, whatever the router checked); an exception in one request's
sampler fails that request (``RowGuard``); a step that raises anywhere else fails every
request in flight, and ``rebuild`` starts a clean generator and proves it with a probe
generation, or raises ``EngineUnrecoverableError`` so the worker exits and is restarted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.generate import BatchGenerator, StopSequences
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache

from caches import snapshot
from caches.prefix_cache import PrefixCache, PrefixHit
from caches.quantized import KVQuantization, quantized_nbytes, row_caches
from caches.radix import common_prefix

from engines.errors import EngineUnrecoverableError
from engines.grammar_mask import MaskBatch
from engines.prefill_policy import MAX_PROMPTS, PREFILL_SHARE, AdmissionQueue, PrefillPolicy
from engines.protocol import (
    AddRequest,
    DiskCounters,
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
    # Prompt offsets where its prefill segments end (the generator feeds the last token alone
    # after them), ascending; snapshots are taken at those in ``snapshot_points``.
    cuts: list[int]
    snapshot_points: list[int]
    hit: PrefixHit | None = None  # the cache entry it started from, pinned while it runs
    prefilled_to: int = 0  # prompt tokens in its cache so far (its cache hit's to begin with)
    announced: bool = False  # whether cached_tokens went out with a delta yet
    queued_s: float = 0.0  # from arrival in the worker to joining the generator
    admitted_at: float = 0.0  # perf_counter when it joined the generator
    prefill_left: int = 0  # prompt tokens the generator has yet to prefill
    decoding: bool = False  # past its prompt, in the generator's decode batch

    @property
    def prefilled(self) -> bool:
        """Its whole prompt but the last token is in (and snapshotted, with a prefix cache)."""
        return self.prefilled_to >= len(self.prompt) - 1


@dataclass
class _Queued:
    """A valid request waiting for the generator, with the cache entry it starts from if one is
    pinned for it already (a prefix just loaded from disk; others are looked up when fed)."""

    request: AddRequest
    hit: PrefixHit | None = None


@dataclass
class _Held:
    """A request waiting for a prefilling sequence's snapshot of the prefix they share."""

    request: AddRequest
    leader_uid: int
    covered: int  # prompt tokens the cache served before it waited
    ready_at: int  # admitted once the leader has a snapshot of at least this many prompt tokens


def model_vocab_size(model) -> int:
    """Rows of the model's logits (its config's vocab_size; tokenizers may have fewer)."""
    size = getattr(getattr(model, "args", None), "vocab_size", None)
    if not isinstance(size, int) or size < 2:
        raise ValueError("cannot tell the model's vocabulary size (model.args.vocab_size)")
    return size


class Scheduler:
    """Continuous batching for one model: requests join the running batch at the next step."""

    def __init__(self, model, *, max_concurrency: int, prefill_step: int, max_context: int,
                 prefix_cache: PrefixCache | None = None, kv_quantization: KVQuantization | None = None,
                 kv_window: int = 0, prefill_share: float = PREFILL_SHARE) -> None:
        self._model = model
        self._kv_window = kv_window or None  # mlx-lm's max_kv_size
        self._max_context = max_context
        self.vocab_size = model_vocab_size(model)
        self._max_concurrency = max_concurrency
        self._prefill_step = prefill_step
        self._generator = self._new_generator()
        self._by_uid: dict[int, _Sequence] = {}
        self._uid_by_request: dict[str, int] = {}
        self._rejected: list[TokenDelta] = []
        self._arrived: dict[str, float] = {}  # request id → perf_counter at add(), until it joins the generator or ends
        self._matchers: dict[str, object] = {}  # request id → its grammar's matcher, until it joins the generator
        self.grammar_masks = MaskBatch(self.vocab_size)  # the constrained sequences' masks, computed together each step
        self.prefix_cache = prefix_cache
        self._quantization = kv_quantization
        self._quantize_after = kv_quantization.quantize_after if kv_quantization is not None else 0
        self._held: dict[str, _Held] = {}
        # Valid requests not in the generator yet: fed to it as the prefill policy allows.
        self._queued: AdmissionQueue[_Queued] = AdmissionQueue(max_overtaken=max_concurrency)
        self._policy = PrefillPolicy(cap=prefill_step, share=prefill_share)
        # Requests waiting for a prefix-cache entry to come back from disk, by the entry's tokens.
        self._loading: dict[str, tuple[AddRequest, tuple[int, ...]]] = {}
        # Whether any snapshot can be cut back to a shorter prefix (a sliding window stops
        # rewinding once a prompt is longer than it); if not, only exact snapshot points serve.
        layers = self._new_caches()
        self._rewindable = snapshot.is_trimmable(layers) and not any(isinstance(layer, RotatingKVCache) for layer in layers)
        self.exact_snapshots = prefix_cache is not None and not self._rewindable
        self.shared_prefill_tokens = 0  # prompt tokens served from a snapshot a held request waited for

    def _new_generator(self) -> BatchGenerator:
        return BatchGenerator(
            self._model,
            completion_batch_size=self._max_concurrency,
            # The scheduler feeds it at most this many prompts to prefill at once (``_feed``).
            prefill_batch_size=min(self._max_concurrency, MAX_PROMPTS),
            prefill_step_size=self._prefill_step,
            max_kv_size=self._kv_window,
        )

    def _new_caches(self) -> list:
        """One sequence's per-layer caches as the generator makes them (bounded by the KV window, if any)."""
        return make_prompt_cache(self._model, self._kv_window)

    # ------------------------------------------------------------------ public API

    @property
    def has_work(self) -> bool:
        return bool(self._by_uid or self._rejected or self._held or self._loading or self._queued)

    def add(self, request: AddRequest, matcher=None) -> None:
        """Queue a request; it joins the batch at the next step. Bad requests fail, never raise.

        ``matcher``: the request's compiled grammar (an llguidance matcher, ``engines.grammar``).
        """
        error = self._validate(request)
        if error is not None:
            self._reject(request.request_id, error, ErrorKind.INVALID_REQUEST)
            return
        if matcher is not None:
            self._matchers[request.request_id] = matcher
        self._arrived[request.request_id] = time.perf_counter()
        self._start(request)

    def abort(self, request_ids: list[str]) -> None:
        """Free the slots of these requests now; their KV memory goes with them."""
        aborted = set(request_ids)
        for request_id in request_ids:
            self._arrived.pop(request_id, None)
            self._matchers.pop(request_id, None)
        for request_id in [rid for rid in request_ids if rid in self._held or rid in self._loading]:
            self._held.pop(request_id, None)
            self._loading.pop(request_id, None)
            self._rejected.append(TokenDelta(request_id, [], FinishReason.ABORT))
        for queued in self._queued.remove(lambda queued: queued.request.request_id in aborted):
            self._release_hit(queued.hit)
            self._rejected.append(TokenDelta(queued.request.request_id, [], FinishReason.ABORT))
        for uid in self._release([rid for rid in request_ids if rid in self._uid_by_request]):
            self._rejected.append(TokenDelta(self._end(uid).request_id, [], FinishReason.ABORT))

    def step(self) -> StepOutputs:
        """Run one engine step and collect what every sequence produced."""
        outputs: list[TokenDelta] = []
        self._admit_loaded()
        prefilling = [sequence for sequence in self._by_uid.values() if not sequence.decoding]
        if self._queued or prefilling:
            prefilling = self._feed(prefilling)
        if self._by_uid:
            prompt_responses, responses = self._timed_next(prefills=bool(prefilling))
            for response in prompt_responses:
                self._prefill_progress(response)
                if response.end_of_segment and not response.end_of_prompt:
                    self._segment_done(response.uid)
            failed = {uid for uid, sequence in self._by_uid.items() if sequence.guard.error is not None}
            responses = [response for response in responses if response.uid not in failed]
            logprobs = self._logprobs(responses)
            outputs.extend(self._collect(response, logprobs.get(response.uid)) for response in responses)
            outputs.extend(self._fail_guarded(failed))
        elif self._loading and not self._rejected:
            time.sleep(0.002)  # nothing to compute until the disk answers
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
        disk = self.prefix_cache.disk if self.prefix_cache is not None else None
        disk_counters = None
        if disk is not None:
            d = disk.stats
            disk_counters = DiskCounters(d.entries, d.bytes, disk.budget_bytes, d.hits, d.hit_tokens, d.bytes_written, d.bytes_read,
                                         disk.queue_depth, d.dropped_writes, d.failed_writes, d.removed_unreadable,
                                         d.restore_seconds, d.flush_seconds)
        return WorkerStatus(running=len(self._by_uid), waiting=len(self._held) + len(self._loading) + len(self._queued),
                            prefix_cache=counters,
                            prefix_disk=disk_counters,
                            kv_bytes=self._generator.prompt_cache_nbytes, kv_quantized_bytes=self._kv_quantized_bytes(),
                            kv_bits=self._quantization.bits if self._quantization else 0)

    def fail_all(self) -> StepOutputs:
        """After a step that raised: fail every request in flight (call ``rebuild`` next)."""
        outputs = [_engine_failure(s.request_id) for s in self._by_uid.values()]
        outputs += [_engine_failure(request_id) for request_id in [*self._held, *self._loading]]
        for queued in self._queued.remove(lambda _: True):
            self._release_hit(queued.hit)
            outputs.append(_engine_failure(queued.request.request_id))
        for sequence in self._by_uid.values():
            self._unpin(sequence)
        self._by_uid.clear()
        self._uid_by_request.clear()
        self._held.clear()
        self._loading.clear()
        self._matchers.clear()
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

    def _start(self, request: AddRequest) -> None:
        """Queue a valid request for the generator, once its prefix is loaded from disk if it is there."""
        if self.prefix_cache is not None:
            candidate = self.prefix_cache.disk_candidate(request.prompt_tokens, gain=SHARE_MIN_TOKENS)
            if candidate is not None:
                self.prefix_cache.request_load(candidate)
                self._loading[request.request_id] = (request, candidate.tokens)
                return
        covered = self.prefix_cache.longest(request.prompt_tokens) if self.prefix_cache is not None else 0
        self._queued.push(_Queued(request), remaining=len(request.prompt_tokens) - covered)

    def _feed(self, prefilling: list[_Sequence]) -> list[_Sequence]:
        """Move queued requests into the generator, shortest remaining prefill first, as many as
        the next step's prefill budget holds (at least one when nothing prefills), at most
        ``MAX_PROMPTS`` prefilling and ``max_concurrency`` in the generator; returns the
        sequences prefilling now (``prefilling``: those that were)."""
        plan = self._policy.plan(decoding=len(self._by_uid) - len(prefilling))
        self._generator.prefill_step_size = plan.chunk
        prefilling = list(prefilling)
        committed = sum(min(sequence.prefill_left, plan.chunk) for sequence in prefilling)
        while self._queued and len(self._by_uid) < self._max_concurrency and len(prefilling) < MAX_PROMPTS:
            queued, remaining = self._queued.peek()
            cost = min(remaining, plan.chunk)
            if plan.budget is not None and prefilling and committed + cost > plan.budget:
                break
            self._queued.pop()
            request, hit = queued.request, queued.hit
            if hit is None and self._hold_for_leader(request):
                continue
            if hit is None and self.prefix_cache is not None:
                hit = self.prefix_cache.lookup(request.prompt_tokens)
            sequence = self._admit(request, hit)
            if sequence is not None:
                prefilling.append(sequence)
                committed += min(sequence.prefill_left, plan.chunk)
        return prefilling

    def _hold_for_leader(self, request: AddRequest) -> bool:
        """Whether ``request`` now waits for a prefilling sequence's snapshot of the prefix they share."""
        if self.prefix_cache is None:
            return False
        covered = self.prefix_cache.longest(request.prompt_tokens)
        leader = self._leader_for(request.prompt_tokens, covered)
        if leader is None:
            return False
        leader_uid, ready_at = leader  # looked up once the leader's snapshot is in
        self._held[request.request_id] = _Held(request, leader_uid, covered, ready_at)
        return True

    def _timed_next(self, *, prefills: bool) -> tuple[list, list]:
        """One generator step, its costs told to the prefill policy: split by mlx-lm's counters
        when it ``prefills``, the step's wall time when it only decodes (cheaper to read)."""
        if prefills:
            with self._generator.stats() as cost:
                produced = self._generator.next()
            self._policy.observe(cost.prompt_tokens, cost.prompt_time, cost.generation_steps, cost.decode_time)
            return produced
        started = time.perf_counter()
        produced = self._generator.next()
        self._policy.observe(0, 0.0, 1, time.perf_counter() - started)
        return produced

    def _prefill_progress(self, response) -> None:
        """Follow a prompt's prefill: tokens left, and whether it now decodes."""
        sequence = self._by_uid.get(response.uid)
        if sequence is None:
            return
        done, total = response.progress
        sequence.prefill_left = total - done
        sequence.decoding = response.end_of_prompt

    def _validate(self, request: AddRequest) -> str | None:
        if (request.request_id in self._uid_by_request or request.request_id in self._held or request.request_id in self._loading
                or any(queued.request.request_id == request.request_id for queued in self._queued)):
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
        if problem:
            return problem[1]
        if any(not 0 < point < len(request.prompt_tokens) for point in request.snapshot_at):
            return f"snapshot_at offsets must lie inside the prompt (1 to {len(request.prompt_tokens) - 1})"
        return None

    def _admit(self, request: AddRequest, hit: PrefixHit | None) -> _Sequence | None:
        """Insert into the generator, starting from ``hit`` if the cache had a prefix (None: it failed)."""
        prompt = list(request.prompt_tokens)
        start = hit.length if hit is not None else 0
        points = self._snapshot_points(request, start)
        end = len(prompt) - 1
        cuts = sorted(set(points) | self._precision_cut(start, len(prompt)) | {end}) if start < end else []
        try:
            processors = make_processors(request.sampling, len(prompt))
            sampler = make_sampler(request.sampling, self.vocab_size)
            matcher = self._matchers.pop(request.request_id, None)
            if matcher is not None:  # after bias and penalties: nothing may re-allow a masked token
                mask = self.grammar_masks.mask(matcher, len(prompt), list(request.stop_token_ids))
                processors.append(mask)
                sampler = mask.sampler(sampler)  # its own sampler, even when greedy: it records the token
            guard = RowGuard(sampler, processors)
            (uid,) = self._generator.insert_segments(
                # The generator feeds the last token on its own after the final segment.
                [[prompt[a:b] for a, b in zip([start, *cuts], [*cuts, len(prompt)])]],
                max_tokens=[request.max_tokens],
                caches=[hit.layers if hit is not None else self._fresh_caches()],
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
            return None
        now = time.perf_counter()
        sequence = _Sequence(request.request_id, request.sampling.top_logprobs, cached_tokens=start, guard=guard,
                             prompt=prompt, cuts=cuts, snapshot_points=points, hit=hit, prefilled_to=start,
                             prefill_left=len(prompt) - start, queued_s=now - self._arrived.pop(request.request_id, now),
                             admitted_at=now)
        self._by_uid[uid] = sequence
        self._uid_by_request[request.request_id] = uid
        return sequence

    def _can_cut(self, snapshot_length: int, length: int) -> bool:
        """Whether a snapshot of ``snapshot_length`` tokens can serve ``length`` of them: a
        quantized one (past quantize_after) not below the threshold (``snapshot.rewind_floor``)."""
        return snapshot_length < self._quantize_after or length >= self._quantize_after

    def _snapshot_points(self, request: AddRequest, start: int) -> list[int]:
        """Where the prefill of ``request`` (from ``start``) stops for a snapshot: its prompt's end,
        and for caches that cannot rewind, the offsets it asked for."""
        end = len(request.prompt_tokens) - 1
        if self.prefix_cache is None or start >= end:
            return []  # nothing left to prefill but the last token, or nowhere to keep it
        asked = request.snapshot_at if self.exact_snapshots else ()
        return sorted({point for point in asked if start < point < end} | {end})

    def _admit_loaded(self) -> None:
        """Start the requests whose prefix came back from disk (or failed to: they prefill it)."""
        if self.prefix_cache is None or self.prefix_cache.disk is None:
            return
        settled = set(self.prefix_cache.apply_disk_events())
        if not settled:
            return
        for request_id in [rid for rid, (_, tokens) in self._loading.items() if tokens in settled]:
            request, _ = self._loading.pop(request_id)
            # Looked up (and pinned) now, not when fed: the entry must survive the eviction below.
            # Loaded or not, it is queued once: an entry larger than memory must not loop.
            hit = self.prefix_cache.lookup(request.prompt_tokens)
            if hit is not None:
                self.prefix_cache.disk.stats.hits += 1
                self.prefix_cache.disk.stats.hit_tokens += hit.length
            self._queued.push(_Queued(request, hit), remaining=len(request.prompt_tokens) - (hit.length if hit else 0))
        # Only now, with the loaded entries pinned by who waited for them, back to the budget.
        self.prefix_cache.evict_to(self.prefix_cache.memory_bytes)

    def _kv_quantized_bytes(self) -> int:
        if self._quantization is None:
            return 0
        # The generator's three stages (mlx-lm keeps them private; its prompt_cache_nbytes
        # sums the same caches without telling quantized bytes apart).
        generator = self._generator
        layers = [layer for pending in generator._unprocessed_sequences for layer in pending[3]]
        layers += generator._prompt_batch.prompt_cache + generator._generation_batch.prompt_cache
        return sum(quantized_nbytes(layer) for layer in layers)

    def _precision_cut(self, start: int, length: int) -> set[int]:
        """Where a quantized cache's sequence switches to quantized attention: no prefill chunk
        may straddle it, so a token's precision depends on its position alone."""
        after = self._quantize_after
        return {after} if start < after < length - 1 else set()

    def _fresh_caches(self) -> list | None:
        """A new sequence's caches (None: the generator makes plain ones)."""
        if self._quantization is None:
            return None
        return row_caches(self._new_caches(), self._quantization)

    def _leader_for(self, prompt: list[int], covered: int) -> tuple[int, int] | None:
        """(uid, snapshot length to wait for) of a still-prefilling sequence whose coming snapshot
        serves a long uncached prefix of ``prompt``."""
        best, best_ready = None, covered + SHARE_MIN_TOKENS - 1
        for uid, sequence in self._by_uid.items():
            if sequence.prefilled:
                continue
            shared = common_prefix(prompt, sequence.prompt)
            coming = [point for point in sequence.snapshot_points if point > sequence.prefilled_to]
            if self._rewindable:  # its next snapshot, cut back to what they share (if it can be)
                ready = min(shared, coming[0]) if coming and self._can_cut(coming[0], shared) else 0
            else:  # only a snapshot that ends inside what they share
                ready = max((point for point in coming if point <= shared), default=0)
            if ready > best_ready:
                best, best_ready = uid, ready
        return (best, best_ready) if best is not None else None

    def _segment_done(self, uid: int) -> None:
        """A prefill segment ended: snapshot the prompt so far if asked to, admit who waited for it."""
        sequence = self._by_uid.get(uid)
        if sequence is None or sequence.prefilled:
            return
        sequence.prefilled_to = next(cut for cut in sequence.cuts if cut > sequence.prefilled_to)
        if self.prefix_cache is None or sequence.prefilled_to not in sequence.snapshot_points:
            return
        layers, tokens = self._generator.extract_cache([uid])[uid]
        self.prefix_cache.store(list(tokens), layers)
        self._admit_followers(uid, upto=len(tokens))

    def _admit_followers(self, leader_uid: int, upto: int | None = None) -> None:
        """Admit who waited on ``leader_uid`` for a snapshot of at most ``upto`` tokens (all: None)."""
        for request_id in [rid for rid, held in self._held.items()
                           if held.leader_uid == leader_uid and (upto is None or held.ready_at <= upto)]:
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
        self._release_hit(sequence.hit)
        sequence.hit = None

    def _release_hit(self, hit: PrefixHit | None) -> None:
        if hit is not None:
            self.prefix_cache.release(hit)

    def reject(self, request_id: str, message: str, kind: ErrorKind) -> None:
        """Fail a request that never reached ``add`` (its grammar did not compile); sent at the next step."""
        self._reject(request_id, message, kind)

    def _reject(self, request_id: str, message: str, kind: ErrorKind) -> None:
        logger.warning("rejected request %s: %s", request_id, message)
        self._arrived.pop(request_id, None)
        self._matchers.pop(request_id, None)
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

    def _logprobs(self, responses: list) -> dict[int, TokenLogprob]:
        """The step's logprobs for every sequence that asked for them (emitted tokens only),
        read from the device once for the whole batch, not once per sequence."""
        wanted = [(response, self._by_uid[response.uid].top_logprobs) for response in responses
                  if self._by_uid[response.uid].top_logprobs is not None and response.finish_reason != "stop"]
        if not wanted:
            return {}
        return {response.uid: entry for (response, _), entry in
                zip(wanted, batch_logprobs([r.logprobs for r, _ in wanted], [r.token for r, _ in wanted], [t for _, t in wanted]))}

    def _collect(self, response, logprob: TokenLogprob | None) -> TokenDelta:
        sequence = self._by_uid[response.uid]
        finish = _FINISH_REASONS.get(response.finish_reason) if response.finish_reason else None
        # On "stop" the token is the stop token itself: it ends the turn and is never shown.
        emitted = [] if finish is FinishReason.STOP else [response.token]
        logprobs = [logprob] if logprob is not None and emitted else None
        cached = queued_s = prefill_s = None
        if not sequence.announced:
            sequence.announced, cached = True, sequence.cached_tokens
            queued_s, prefill_s = sequence.queued_s, time.perf_counter() - sequence.admitted_at
        if finish is not None:
            if self.prefix_cache is not None:
                # Prompt and output as fed: the next turn of an agent usually starts with all of it.
                self.prefix_cache.store(list(response.all_tokens), response.prompt_cache)
            del self._uid_by_request[sequence.request_id]
            self._end(response.uid)
        return TokenDelta(sequence.request_id, emitted, finish, logprobs, cached, queued_s=queued_s, prefill_s=prefill_s)


def _engine_failure(request_id: str) -> TokenDelta:
    return TokenDelta(request_id, [], FinishReason.ERROR, error=ENGINE_FAILED, error_kind=ErrorKind.ENGINE)


def batch_logprobs(rows: list[mx.array], tokens: list[int], tops: list[int]) -> list[TokenLogprob]:
    """For each row of log-probabilities: the sampled token's and, if asked, the ``top`` most
    likely tokens, most likely first; computed for all rows together, read back in one transfer."""
    stacked = mx.stack(rows)
    chosen = mx.take_along_axis(stacked, mx.array(tokens)[:, None], axis=1)[:, 0]
    widest = max(tops)
    top_ids = top_values = None
    if widest > 0:
        ids = mx.argpartition(-stacked, kth=widest - 1, axis=-1)[:, :widest]
        values = mx.take_along_axis(stacked, ids, axis=-1)
        order = mx.argsort(-values, axis=-1)
        top_ids, top_values = mx.take_along_axis(ids, order, axis=-1), mx.take_along_axis(values, order, axis=-1)
    mx.eval(chosen, *(() if top_ids is None else (top_ids, top_values)))
    ids_list = top_ids.tolist() if top_ids is not None else [[] for _ in rows]
    values_list = top_values.tolist() if top_values is not None else [[] for _ in rows]
    return [TokenLogprob(token, float(value), [TopLogprob(int(i), float(v)) for i, v in zip(ids[:top], vals[:top])])
            for token, value, top, ids, vals in zip(tokens, chosen.tolist(), tops, ids_list, values_list)]
