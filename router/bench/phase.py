"""What a workload gets while one phase runs against one target, and what it must provide."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from router.bench.client import BenchClient, RequestRecord
from router.bench.targets import Server

Figures = dict[str, float | None]
Series = dict[str, list[float | None]]


@dataclass
class PhaseContext:
    """One (phase, round, target): the client to send with, and where records go."""

    target: str
    phase: str
    round: int
    seed: int  # content seed: the same for every target of one (phase, round), so both sides see one workload
    client: BenchClient
    server: Server
    max_tokens: int
    sampling: dict[str, Any] = field(default_factory=dict)
    on_record: Callable[[RequestRecord], None] = lambda record: None
    records: list[RequestRecord] = field(default_factory=list)
    # OpenAI-shaped prompt of each record (by index), for the ideal cached tokens after the phase.
    prompts: dict[int, dict[str, Any]] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)
    sent: int = 0

    async def send(self, request: dict[str, Any], *, stream: bool = True, max_tokens: int | None = None,
                   prompt: dict[str, Any] | None = None, **fields: Any) -> RequestRecord:
        """Send one request, keep its record and return it.

        ``prompt``: the request as OpenAI chat messages and tools, when the ideal cached
        tokens of this request should be known (``request`` itself may be Anthropic-shaped).
        """
        # Taken before awaiting: concurrent sessions send at once.
        index, self.sent = self.sent, self.sent + 1
        if prompt is not None:
            self.prompts[index] = prompt
        record = await self.client.send(
            request, max_tokens=max_tokens or self.max_tokens, stream=stream, phase_start=self.start, sampling=self.sampling,
            target=self.target, round=self.round, phase=self.phase, index=index, **fields)
        self.records.append(record)
        self.on_record(record)
        return record


class Workload(Protocol):
    name: str

    def phases(self) -> list[str]:
        """Phase names, each run on a freshly started server (e.g. ``sessions=4``)."""

    def planned_requests(self, phase: str) -> int:
        """How many requests the phase sends (for progress)."""

    async def run(self, ctx: PhaseContext) -> None:
        """Send the phase's requests through ``ctx.send``."""

    def figures(self, phase: str, records: list[RequestRecord]) -> Figures:
        """Scalar figures of one (phase, round, target), from its records alone."""

    def series(self, phase: str, records: list[RequestRecord]) -> Series:
        """Per-turn (or per-step) values for plots, from its records alone."""
