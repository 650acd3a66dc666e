"""Constrained decoding in the worker: llguidance grammars as a per-sequence logits mask.

The router sends a request's grammar as llguidance text (``AddRequest.grammar``); the worker
compiles it off the engine thread (``GrammarCompiler``: a thread of its own, the model's
llguidance tokenizer built on first use, compiled grammars kept by their text) and admits the
request with its matcher. Each step, before sampling, ``GrammarMask`` feeds the matcher the
tokens sampled since it last ran and lowers every token the grammar does not allow at that
point by 1e30; temperature, top-p/top-k, penalties and logit bias then act inside the allowed
set. Once the grammar is complete only the request's stop tokens stay allowed.

Why llguidance: docs/benchmarks.md ("Grammar engines") compares it with xgrammar on this
machine: it compiles a tool set 30-90x faster, refuses schema keywords it cannot enforce, and
needs no torch; xgrammar's masks are faster by a few microseconds per token.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import mlx.core as mx
import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["GrammarCompiler", "GrammarError", "GrammarMask"]

# Compiled grammars kept per worker: agents send the same tool set and schema turn after turn.
CACHED_GRAMMARS = 64
# What a masked token's logit goes down by: no allowed token is ever this unlikely.
MASKED = 1e30


class GrammarError(ValueError):
    """The grammar does not compile for this model's tokenizer (the request's fault)."""


class GrammarCompiler:
    """Compiles grammars on a thread of its own, so the engine keeps stepping meanwhile."""

    def __init__(self, model_path: Path) -> None:
        self._model_path = model_path
        self._tokenizer = None  # llguidance.LLTokenizer, built on the compile thread at first use
        self._compiled: OrderedDict[str, object] = OrderedDict()  # grammar text -> a pristine LLMatcher
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grammar")

    def submit(self, grammar: str, done: Callable[[Future], None]) -> None:
        """Compile ``grammar``; ``done(future)`` runs on the compile thread with an LLMatcher or a GrammarError."""
        self._pool.submit(self.matcher, grammar).add_done_callback(done)

    def matcher(self, grammar: str):
        """A fresh matcher for ``grammar`` (a copy of the cached one when seen before).

        Raises:
            GrammarError: The grammar is invalid or does not fit the tokenizer.
        """
        import llguidance

        with self._lock:
            cached = self._compiled.get(grammar)
            if cached is not None:
                self._compiled.move_to_end(grammar)
                return cached.deep_copy()
        tokenizer = self._llg_tokenizer()
        problem = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if problem:
            raise GrammarError(problem.splitlines()[0])
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        if matcher.is_error():
            raise GrammarError(matcher.get_error().splitlines()[0])
        with self._lock:
            self._compiled[grammar] = matcher
            while len(self._compiled) > CACHED_GRAMMARS:
                self._compiled.popitem(last=False)
        return matcher.deep_copy()

    def _llg_tokenizer(self):
        if self._tokenizer is None:
            import llguidance.hf
            from transformers import AutoTokenizer

            hf = AutoTokenizer.from_pretrained(self._model_path)
            self._tokenizer = llguidance.hf.from_tokenizer(hf)
            logger.info("grammar tokenizer ready (%d tokens)", self._tokenizer.vocab_size)
        return self._tokenizer

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class GrammarMask:
    """One sequence's logits processor: the grammar's allowed tokens, else -inf.

    mlx-lm calls it with every token of the sequence so far (prompt included); the tokens
    past what the matcher has seen are the ones sampled since, and go into the matcher first.
    """

    def __init__(self, matcher, prompt_tokens: int, stop_token_ids: list[int], vocab_size: int) -> None:
        self._matcher = matcher
        self._seen = prompt_tokens
        self._stops = [t for t in stop_token_ids if 0 <= t < vocab_size]
        self._vocab = vocab_size
        self._words = np.zeros((vocab_size + 31) // 32, dtype=np.int32)  # llguidance's bitmask, reused

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        total = tokens.shape[-1]
        if total > self._seen:
            sampled = tokens[self._seen :].tolist()
            self._seen = total
            if not self._matcher.is_stopped() and not self._matcher.consume_tokens(sampled):
                raise GrammarError(f"a sampled token broke the grammar: {self._matcher.get_error().splitlines()[0]}")
        # Additive, and finite: on MLX's CPU backend a where() against -inf costs 6x this per row at
        # a 151k vocabulary (docs/benchmarks.md); in float32, so that the bias never overflows a
        # half-precision logit into inf * 0.
        allowed = mx.array(self.allowed().view(np.uint8))
        return logits + (allowed.astype(mx.float32) - 1.0) * MASKED

    def allowed(self) -> np.ndarray:
        """A bool per vocabulary entry: may it come next?"""
        if self._matcher.is_stopped():  # the grammar is complete: only the end of the turn
            allowed = np.zeros(self._vocab, dtype=bool)
            allowed[self._stops] = True
            return allowed
        self._matcher.unsafe_compute_mask_ptr(self._words.ctypes.data, self._words.nbytes)
        allowed = np.unpackbits(self._words.view(np.uint8), bitorder="little")[: self._vocab].astype(bool)
        if self._matcher.is_accepting():  # llguidance allows its own EOS: any stop token ends the turn
            allowed[self._stops] = True
        if not allowed.any():
            raise GrammarError("the grammar allows no token here")
        return allowed
