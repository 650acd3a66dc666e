"""Grammar masks for a batch: every constrained sequence's allowed tokens, computed together once
per step while the model's forward pass runs.

Each constrained sequence has a ``GrammarMask`` (its logits processor, after bias and penalties)
whose sampler records what it samples. mlx-lm's step runs the forward pass, then each row's
processors, then each row's sampler. The first mask called in a step finds the masks that are
out of date (their sequence sampled since) and refreshes them all at once (``MaskBatch``):

    forward pass built ──▶ first GrammarMask call: queue the forward pass (async), read the
                           tokens sampled last step, feed the matchers, compute every stale
                           mask with llguidance's parallel executor (no GIL held) while the
                           forward runs, one bias array for the batch ──▶ each row: logits +
                           its bias row ──▶ samplers (each constrained one records its token)

A mask lowers every token its grammar does not allow by 1e30 (additive and finite: on MLX's CPU
backend a where() against -inf costs 6x this per row at a 151k vocabulary, docs/benchmarks.md;
in float32, so that the bias never overflows a half-precision logit into inf * 0). Temperature,
top-p/top-k, penalties and logit bias act inside the allowed set. Once the grammar is complete
only the request's stop tokens stay allowed. Unconstrained rows are never touched. A mask's
failure (a token that broke its grammar, a grammar that allows nothing) is raised by that
sequence's own processor, never by a neighbour's.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

import llguidance
import llguidance.numpy
import mlx.core as mx
import numpy as np

from engines.grammar import GrammarError

logger = logging.getLogger(__name__)

__all__ = ["MASKED", "GrammarMask", "MaskBatch"]

# What a masked token's logit goes down by: no allowed token is ever this unlikely.
MASKED = 1e30

Sampler = Callable[[mx.array], mx.array]


class MaskBatch:
    """The grammar masks of one scheduler's sequences; refreshes the stale ones together."""

    def __init__(self, vocab_size: int, threads: int | None = None) -> None:
        self._vocab = vocab_size
        self._words = (vocab_size + 31) // 32
        self._masks: weakref.WeakSet[GrammarMask] = weakref.WeakSet()  # a finished sequence's mask goes with it
        self._executor = llguidance.LLExecutor(threads)
        self._bitmask = np.zeros((1, self._words), dtype=np.int32)  # reused while the batch is no wider
        self.refreshes = 0  # times masks were computed (once per step with constrained rows)
        self.masks_computed = 0
        self.widest = 0  # most masks computed in one refresh

    def mask(self, matcher, prompt_tokens: int, stop_token_ids: list[int]) -> GrammarMask:
        """A new sequence's mask (its matcher: a fresh ``GrammarCompiler.matcher``)."""
        mask = GrammarMask(matcher, prompt_tokens, [t for t in stop_token_ids if 0 <= t < self._vocab], self)
        self._masks.add(mask)
        return mask

    def refresh(self, running: mx.array | None) -> None:
        """Bring every stale mask up to date; ``running``: logits to start computing meanwhile."""
        if running is not None:  # queued behind the last step's sampling: the device never waits for the masks
            mx.async_eval(running)
        stale = [mask for mask in self._masks if mask.stale]
        for mask in stale:  # tokens scheduled before the forward pass: reading one waits for its step only
            mask.take_sampled()
        allowed = self._allowed(stale)
        bias = (mx.array(allowed.view(np.uint8)).astype(mx.float32) - 1.0) * MASKED
        for row, mask in enumerate(stale):
            mask.set_allowed(bias[row : row + 1], allowed[row])
        self.refreshes += 1
        self.masks_computed += len(stale)
        self.widest = max(self.widest, len(stale))

    def _allowed(self, masks: list[GrammarMask]) -> np.ndarray:
        """A bool per vocabulary entry and mask: may it come next?"""
        if self._bitmask.shape[0] < len(masks):
            self._bitmask = np.zeros((len(masks), self._words), dtype=np.int32)
        bitmask = self._bitmask[: len(masks)]
        bitmask.fill(0)
        live = [(mask.matcher, row) for row, mask in enumerate(masks) if mask.error is None and not mask.matcher.is_stopped()]
        if len(live) == 1:
            matcher, row = live[0]
            matcher.unsafe_compute_mask_ptr(bitmask[row].ctypes.data, bitmask[row].nbytes)
        elif live:
            llguidance.numpy.fill_next_token_bitmask_par(self._executor, live, bitmask)
        allowed = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[:, : self._vocab].astype(bool)
        for row, mask in enumerate(masks):
            mask.finish_row(allowed[row])
        return allowed


class GrammarMask:
    """One sequence's logits processor: its grammar's allowed tokens, the others 1e30 lower.

    mlx-lm calls it with every token of the sequence so far (prompt included); the one past what
    the mask has accounted for is the token its sampler (``sampler``) recorded last step.
    """

    def __init__(self, matcher, prompt_tokens: int, stop_token_ids: list[int], batch: MaskBatch) -> None:
        """Made by ``MaskBatch.mask`` (``stop_token_ids`` inside the vocabulary)."""
        self.matcher = matcher
        self._batch = batch
        self._seen = prompt_tokens  # tokens of the sequence accounted for (the one sampled last included)
        self._stops = stop_token_ids
        self._sampled: mx.array | None = None  # the token sampled last step, not fed to the matcher yet
        self._bias: mx.array | None = None  # (1, vocab): 0 where allowed, -1e30 elsewhere; None: stale
        self._allowed: np.ndarray | None = None
        self.error: str | None = None

    @property
    def stale(self) -> bool:
        return self._bias is None

    def sampler(self, sample: Sampler) -> Sampler:
        """``sample``, recording each token it draws for this mask's next step."""
        def recorded(logprobs: mx.array) -> mx.array:
            token = sample(logprobs)
            self._sampled, self._bias, self._allowed = token, None, None
            self._seen += 1
            return token

        return recorded

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if tokens.shape[-1] != self._seen:  # the sampler's record and mlx-lm's context must agree
            raise GrammarError(f"the grammar saw {self._seen} tokens of a sequence of {tokens.shape[-1]}")
        if self._bias is None:
            self._batch.refresh(logits)
        if self.error is not None:
            raise GrammarError(self.error)
        return logits + self._bias

    def allowed(self) -> np.ndarray:
        """A bool per vocabulary entry: may it come next? (Refreshes the batch's stale masks.)"""
        if self._bias is None:
            self._batch.refresh(None)
        if self.error is not None:
            raise GrammarError(self.error)
        return self._allowed

    # ------------------------------------------------------------------ MaskBatch's side

    def take_sampled(self) -> None:
        """Feed the matcher the token sampled last step (a stop token ends the sequence instead)."""
        if self._sampled is None:
            return
        token, self._sampled = self._sampled.item(), None
        if self.error is not None or token in self._stops or self.matcher.is_stopped():
            return
        if not self.matcher.consume_token(token):
            self.error = f"a sampled token broke the grammar: {self.matcher.get_error().splitlines()[0]}"

    def finish_row(self, allowed: np.ndarray) -> None:
        """Complete the engine's mask in place: the stop tokens once the grammar may end."""
        if self.error is not None:
            allowed[:] = True  # never sampled from: its processor raises
            return
        if self.matcher.is_stopped():  # the grammar is complete: only the end of the turn
            allowed[:] = False
            allowed[self._stops] = True
        elif self.matcher.is_accepting():  # llguidance allows its own EOS: any stop token ends the turn
            allowed[self._stops] = True
        if not allowed.any():
            self.error = "the grammar allows no token here"
            allowed[:] = True

    def set_allowed(self, bias: mx.array, allowed: np.ndarray) -> None:
        self._bias, self._allowed = bias, allowed
