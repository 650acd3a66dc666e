"""``long``: one session grown turn by turn to a long context — TTFT as the context grows."""

from __future__ import annotations

import math
from dataclasses import dataclass

from router.bench import stats
from router.bench.client import RequestRecord
from router.bench.phase import Figures, PhaseContext, Series
from router.bench.profiles import PROFILES, AgentPrefix, AgentSession, Profile
from router.bench.workloads.agent import turn_series


@dataclass
class LongWorkload:
    to_tokens: int
    step_tokens: int
    profile: Profile
    name: str = "long"

    @classmethod
    def from_args(cls, args) -> LongWorkload:
        return cls(args.to, args.step, PROFILES[args.profile])

    def phases(self) -> list[str]:
        return [f"to={self.to_tokens}"]

    def planned_requests(self, phase: str) -> int:
        start = self.profile.system_tokens + self.profile.tools * self.profile.tool_description_tokens
        return max(1, math.ceil((self.to_tokens - start) / self.step_tokens) + 1)

    async def run(self, ctx: PhaseContext) -> None:
        session = AgentSession.start(AgentPrefix.build(self.profile, ctx.seed), self.profile, seed=ctx.seed * 31)
        for turn in range(1, self.planned_requests(ctx.phase) + 1):
            request, prompt = session.request(ctx.client.api)
            record = await ctx.send(request, prompt=prompt, session=0, turn=turn)
            if not record.ok:
                break  # a longer context would fail the same way
            # The server's count decides when the context is long enough, not the estimate.
            if record.prompt_tokens is not None and record.prompt_tokens + self.step_tokens > self.to_tokens:
                break
            session.add_step(self.step_tokens)

    def figures(self, phase: str, records: list[RequestRecord]) -> Figures:
        ok = sorted((r for r in records if r.ok), key=lambda r: r.turn or 0)
        return {
            **stats.request_figures(records),
            "ttft_first_s": ok[0].ttft_s if ok else None,
            "ttft_last_s": ok[-1].ttft_s if ok else None,
            "prompt_tokens_last": float(ok[-1].prompt_tokens) if ok and ok[-1].prompt_tokens is not None else None,
            "cached_ratio_later": stats.cached_ratio([r for r in ok if (r.turn or 0) >= 2]),
        }

    def series(self, phase: str, records: list[RequestRecord]) -> Series:
        return turn_series(records)
