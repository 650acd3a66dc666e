"""Constrained decoding in the worker: llguidance grammars compiled off the engine thread.

The router sends a request's grammar as llguidance text (``AddRequest.grammar``); the worker
compiles it here (``GrammarCompiler``: a thread of its own, the model's llguidance tokenizer
built on first use, compiled grammars kept by their text) and admits the request with its
matcher, which ``engines.grammar_mask`` turns into a logits mask each step.

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

logger = logging.getLogger(__name__)

__all__ = ["GrammarCompiler", "GrammarError"]

# Compiled grammars kept per worker: agents send the same tool set and schema turn after turn.
CACHED_GRAMMARS = 64


class GrammarError(ValueError):
    """The grammar does not compile for this model's tokenizer (the request's fault)."""


class GrammarCompiler:
    """Compiles grammars on a thread of its own, so the engine keeps stepping meanwhile."""

    def __init__(self, model_path: Path, vocab_size: int | None = None) -> None:
        """``vocab_size``: rows of the model's logits, when the checkpoint pads its embedding past
        the tokenizer (Qwen's 151,936 rows for 151,665 tokens): masks then have one bit per row."""
        self._model_path = model_path
        self._vocab_size = vocab_size
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
            self._tokenizer = llguidance.hf.from_tokenizer(hf, n_vocab=self._vocab_size)
            logger.info("grammar tokenizer ready (%d tokens)", self._tokenizer.vocab_size)
        return self._tokenizer

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


