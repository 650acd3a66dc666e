"""An upstream's health: its state, the latency and errors seen, and when to check it next.

Pure bookkeeping (no I/O), so the schedule is testable on its own. An upstream starts `checking`
(requests go through while the first check runs); a check or request that cannot reach it makes it
`unreachable`, checked again after 1, 2, 4 ... up to 30 s; the first answer makes it `healthy` again,
checked every 10 s.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

__all__ = ["HEALTHY_INTERVAL_S", "Health", "UpstreamState", "backoff_s"]

HEALTHY_INTERVAL_S = 10.0
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 30.0


class UpstreamState(str, enum.Enum):
    CHECKING = "checking"  # no check has answered yet: requests are tried
    HEALTHY = "healthy"
    UNREACHABLE = "unreachable"  # requests answer 503 + Retry-After until a check succeeds


def backoff_s(failures: int) -> float:
    """Seconds before the next check after ``failures`` consecutive failures (>= 1)."""
    return min(MAX_RETRY_S, FIRST_RETRY_S * 2 ** max(0, failures - 1))


@dataclass
class Health:
    state: UpstreamState = UpstreamState.CHECKING
    consecutive_failures: int = 0
    last_latency_s: float | None = None  # the last successful health check's round trip
    last_error: str | None = None
    checks: int = 0
    errors: int = 0  # failed checks and requests that could not reach it, since it was configured
    next_check_at: float = field(default_factory=time.monotonic)

    def succeeded(self, latency_s: float) -> None:
        self.checks += 1
        self.state = UpstreamState.HEALTHY
        self.consecutive_failures = 0
        self.last_latency_s = latency_s
        self.next_check_at = time.monotonic() + HEALTHY_INTERVAL_S

    def failed(self, error: str, *, check: bool) -> None:
        """A check, or a request (``check=False``), could not reach the upstream."""
        self.checks += check
        self.errors += 1
        self.last_error = error
        self.consecutive_failures += 1
        self.state = UpstreamState.UNREACHABLE
        self.next_check_at = time.monotonic() + backoff_s(self.consecutive_failures)

    @property
    def available(self) -> bool:
        return self.state is not UpstreamState.UNREACHABLE

    def retry_after_s(self) -> float:
        """What a refused request's Retry-After says: until the next check, at least 1 s."""
        return max(1.0, self.next_check_at - time.monotonic())

    def as_dict(self) -> dict[str, object]:
        return {
            "state": self.state.value, "consecutive_failures": self.consecutive_failures,
            "last_check_latency_ms": None if self.last_latency_s is None else round(self.last_latency_s * 1000, 2),
            "last_error": self.last_error, "checks": self.checks, "errors": self.errors,
            "next_check_in_s": round(max(0.0, self.next_check_at - time.monotonic()), 1),
        }
