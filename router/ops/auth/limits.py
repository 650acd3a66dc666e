"""Per-key limits: requests per minute (a sliding window) and requests in flight.

Kept by key name, so the counts survive a reload that edits a key's other settings. Taking a
place is check-and-take in one synchronous step, as model admission is (router/admission.py).
"""

from __future__ import annotations

import time
from collections import deque

from router.errors import OverloadedError
from router.ops.config import KeyConfig

WINDOW_S = 60.0


class KeyLimits:
    def __init__(self) -> None:
        self._inflight: dict[str, int] = {}
        self._recent: dict[str, deque[float]] = {}
        self._total: dict[str, int] = {}

    def take(self, key: KeyConfig, now: float | None = None) -> None:
        """Count one request of ``key`` (held until ``give_back``), or refuse it with 429 + Retry-After."""
        now = time.monotonic() if now is None else now
        inflight = self._inflight.get(key.name, 0)
        if key.max_concurrent and inflight >= key.max_concurrent:
            raise OverloadedError(f"Key {key.name!r} has {inflight} requests in flight (max_concurrent {key.max_concurrent}); "
                                  "try again in 1s.", retry_after_s=1.0)
        recent = self._recent.setdefault(key.name, deque())
        while recent and now - recent[0] >= WINDOW_S:
            recent.popleft()
        if key.rpm and len(recent) >= key.rpm:
            wait_s = WINDOW_S - (now - recent[0])
            raise OverloadedError(f"Key {key.name!r} reached its {key.rpm} requests per minute; try again in {wait_s:.0f}s.",
                                  retry_after_s=max(wait_s, 1.0))
        recent.append(now)
        self._inflight[key.name] = inflight + 1
        self._total[key.name] = self._total.get(key.name, 0) + 1

    def give_back(self, name: str) -> None:
        self._inflight[name] = self._inflight.get(name, 1) - 1

    def inflight(self, name: str) -> int:
        return self._inflight.get(name, 0)

    def usage(self, name: str, now: float | None = None) -> dict[str, int]:
        """What the status page shows per key: requests since the router started, in the last
        minute, and in flight."""
        now = time.monotonic() if now is None else now
        last_minute = sum(1 for at in self._recent.get(name, ()) if now - at < WINDOW_S)
        return {"requests": self._total.get(name, 0), "last_minute": last_minute, "inflight": self.inflight(name)}
