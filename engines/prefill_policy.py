"""Which prompts to prefill next, and how much of them in one engine step.

Every engine step decodes one token for each running sequence and prefills a chunk of the
waiting prompts; the decoding sequences wait for the whole step. Two decisions follow:

- Order (``AdmissionQueue``): the prompt with the fewest tokens left to prefill goes first
  (shortest remaining work first minimises the mean and median wait of a burst), except that
  no prompt is overtaken more than a bounded number of times, so a long one is never starved
  by a stream of short ones.
- Size (``PrefillPolicy``): with nothing decoding, prefill is all the step does: up to
  ``MAX_PROMPTS`` prompts at once in chunks of the operator's ``prefill_step``. While sequences
  decode, the step's prefill is bounded in time to ``PREFILL_SHARE`` of the step, from what
  steps have cost so far (seconds per prefilled token, seconds per decode step): a token
  budget, spent on the shortest waiting prompts first, in chunks no larger than
  ``prefill_step``. Where prefill is cheap next to a decode step (a GPU) the budget reaches the
  cap and nothing changes; where it is dear (a CPU), a long prompt no longer stalls every
  running stream for seconds, and prompt throughput stays at that share of the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

# mlx-lm's default for prompts prefilled together (mlx_lm.server's --prompt-concurrency).
MAX_PROMPTS = 8
# While sequences decode, prefill gets at most this share of a step's time (see
# docs/benchmarks.md, "Prefill scheduling", for the measurements behind it).
PREFILL_SHARE = 0.9
# The smallest chunk worth a forward pass of its own.
MIN_CHUNK = 32
# How quickly the cost estimates follow the latest steps.
_SMOOTHING = 0.3

T = TypeVar("T")


@dataclass(frozen=True)
class PrefillPlan:
    chunk: int  # tokens of each prompt prefilled in this step, at most
    budget: int | None  # prompt tokens this step may prefill in all (None: no bound)


@dataclass
class PrefillPolicy:
    """Chunk size and token budget for the next step, from the costs of the steps before it."""

    cap: int  # the operator's prefill_step
    share: float = PREFILL_SHARE
    token_s: float | None = None  # seconds per prefilled token, smoothed
    decode_step_s: float | None = None  # seconds per decode step, smoothed

    def plan(self, decoding: int) -> PrefillPlan:
        """What the next step may prefill while ``decoding`` sequences decode."""
        if decoding == 0 or self.share >= 1.0 or self.token_s is None or self.decode_step_s is None:
            return PrefillPlan(self.cap, None)
        # prefill time <= share of the step: t_p <= share / (1 - share) * t_decode
        budget = int(self.share / (1.0 - self.share) * self.decode_step_s / self.token_s)
        budget = max(budget, min(MIN_CHUNK, self.cap))
        return PrefillPlan(min(self.cap, budget), budget)

    def observe(self, prompt_tokens: int, prompt_s: float, decode_steps: int, decode_s: float) -> None:
        """Fold in what one step did (mlx-lm's BatchGenerator counts it)."""
        if prompt_tokens > 0 and prompt_s > 0:
            self.token_s = _smooth(self.token_s, prompt_s / prompt_tokens)
        if decode_steps > 0 and decode_s > 0:
            self.decode_step_s = _smooth(self.decode_step_s, decode_s / decode_steps)


def _smooth(previous: float | None, value: float) -> float:
    return value if previous is None else previous + _SMOOTHING * (value - previous)


@dataclass
class _Entry(Generic[T]):
    item: T
    remaining: int  # prompt tokens left to prefill, as known when it was queued
    arrival: int
    overtaken: int = 0


@dataclass
class AdmissionQueue(Generic[T]):
    """Shortest remaining prefill first, with each entry overtaken at most ``max_overtaken`` times."""

    max_overtaken: int
    _entries: list[_Entry[T]] = field(default_factory=list)
    _arrivals: int = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        return (entry.item for entry in self._entries)

    def push(self, item: T, remaining: int) -> None:
        self._entries.append(_Entry(item, remaining, self._arrivals))
        self._arrivals += 1

    def peek(self) -> tuple[T, int]:
        """The next item and its remaining tokens (the queue must not be empty)."""
        entry = self._next()
        return entry.item, entry.remaining

    def pop(self) -> T:
        entry = self._next()
        self._entries.remove(entry)
        for other in self._entries:
            if other.arrival < entry.arrival:
                other.overtaken += 1
        return entry.item

    def remove(self, predicate: Callable[[T], bool]) -> list[T]:
        """Take out every item for which ``predicate(item)`` holds; returns them."""
        taken = [entry for entry in self._entries if predicate(entry.item)]
        self._entries = [entry for entry in self._entries if not predicate(entry.item)]
        return [entry.item for entry in taken]

    def _next(self) -> _Entry[T]:
        starved = [entry for entry in self._entries if entry.overtaken >= self.max_overtaken]
        if starved:
            return min(starved, key=lambda entry: entry.arrival)
        return min(self._entries, key=lambda entry: (entry.remaining, entry.arrival))
