"""The last few minutes of finished requests per model, for the status page.

Prometheus keeps cumulative histograms and leaves windows to PromQL; an operator glancing at
``/ui`` has no Prometheus at hand, so the router keeps its own short window: TTFT percentiles
and output tokens per second over the last ``window_s`` seconds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 300.0


@dataclass(frozen=True)
class _Finished:
    at: float
    ttft_s: float | None  # None: the request ended before its first token
    tokens: int


class RecentRequests:
    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._started = clock()
        self._by_model: dict[str, deque[_Finished]] = {}

    def observe(self, model_id: str, ttft_s: float | None, tokens: int) -> None:
        now = self._clock()
        finished = self._by_model.setdefault(model_id, deque())
        finished.append(_Finished(now, ttft_s, tokens))
        self._expire(finished, now)

    def summary(self, model_id: str) -> dict[str, float | int | None]:
        """Requests finished in the window, their TTFT p50 and p95 (seconds), and output tokens per
        second over the window (or since the router started, when that is shorter)."""
        now = self._clock()
        finished = self._by_model.get(model_id, deque())
        self._expire(finished, now)
        ttfts = sorted(f.ttft_s for f in finished if f.ttft_s is not None)
        span = min(self.window_s, now - self._started)
        return {
            "window_s": self.window_s, "requests": len(finished),
            "ttft_p50_s": _nearest_rank(ttfts, 0.50), "ttft_p95_s": _nearest_rank(ttfts, 0.95),
            "output_tokens_per_s": sum(f.tokens for f in finished) / span if span > 0 else None,
        }

    def _expire(self, finished: deque[_Finished], now: float) -> None:
        while finished and now - finished[0].at > self.window_s:
            finished.popleft()


def _nearest_rank(ordered: list[float], quantile: float) -> float | None:
    """The smallest value with at least ``quantile`` of the values at or below it."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]
