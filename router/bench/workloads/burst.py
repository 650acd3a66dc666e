"""``burst``: N independent prompts at once — aggregate and per-request decode speed, TTFT."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from router.bench import stats
from router.bench.client import RequestRecord
from router.bench.phase import Figures, PhaseContext, Series
from router.bench.profiles import independent_prompt


@dataclass
class BurstWorkload:
    counts: list[int]
    prompt_tokens: int = 200
    name: str = "burst"

    @classmethod
    def from_args(cls, args) -> BurstWorkload:
        return cls(counts=args.n, prompt_tokens=args.prompt_tokens)

    def phases(self) -> list[str]:
        return [f"n={n}" for n in self.counts]

    def planned_requests(self, phase: str) -> int:
        return int(phase.partition("=")[2])

    async def run(self, ctx: PhaseContext) -> None:
        count = self.planned_requests(ctx.phase)
        # Distinct per request, phase and round: no server can answer one from its cache.
        await asyncio.gather(*(ctx.send({"messages": independent_prompt(ctx.seed * 1000 + i, self.prompt_tokens)})
                               for i in range(count)))

    def figures(self, phase: str, records: list[RequestRecord]) -> Figures:
        return {**stats.request_figures(records), **stats.inter_token_figures(records), "aggregate_tok_s": stats.aggregate_tok_s(records), "wall_s": stats.wall_s(records)}

    def series(self, phase: str, records: list[RequestRecord]) -> Series:
        return {}
