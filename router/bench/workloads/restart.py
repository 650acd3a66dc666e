"""``restart``: two agent turns, a graceful stop (or, with ``--kill``, a SIGKILL of the server and
everything it started: a crash) and a fresh start, then the next turn.

What a team sees after an upgrade or a crash: does the turn after the restart pay a cold
prefill of the whole context, or does the server still hold it (``cached_tokens``)?
"""

from __future__ import annotations

from dataclasses import dataclass

from router.bench import stats
from router.bench.client import RequestRecord
from router.bench.phase import Figures, PhaseContext, Series
from router.bench.profiles import PROFILES, AgentPrefix, AgentSession, Profile
from router.bench.targets import TargetError
from router.bench.workloads.agent import turn_series

TURNS_BEFORE = 2


@dataclass
class RestartWorkload:
    profile: Profile
    result_tokens: int = 300
    kill: bool = False
    name: str = "restart"

    @classmethod
    def from_args(cls, args) -> RestartWorkload:
        return cls(PROFILES[args.profile], args.result_tokens, args.kill)

    def phases(self) -> list[str]:
        return ["crash" if self.kill else "restart"]

    def planned_requests(self, phase: str) -> int:
        return TURNS_BEFORE + 1

    async def run(self, ctx: PhaseContext) -> None:
        if not ctx.server.can_restart:
            raise TargetError("the restart workload needs a launched server: use --launch or --compare")
        session = AgentSession.start(AgentPrefix.build(self.profile, ctx.seed), self.profile, seed=ctx.seed * 31)
        for turn in range(1, TURNS_BEFORE + 2):
            if turn == TURNS_BEFORE + 1:
                await ctx.server.restart(kill=self.kill)
            request, prompt = session.request(ctx.client.api)
            await ctx.send(request, prompt=prompt, session=0, turn=turn, labels={"after_restart": turn > TURNS_BEFORE})
            session.add_step(self.result_tokens)

    def figures(self, phase: str, records: list[RequestRecord]) -> Figures:
        before = {r.turn: r for r in records if not r.labels.get("after_restart") and r.ok}
        after = [r for r in records if r.labels.get("after_restart") and r.ok]
        warm = before.get(TURNS_BEFORE)
        return {
            **stats.request_figures(records),
            "ttft_turn1_s": before[1].ttft_s if 1 in before else None,
            "ttft_warm_s": warm.ttft_s if warm else None,
            "ttft_after_restart_s": after[0].ttft_s if after else None,
            "after_restart_over_warm": stats.ratio(after[0].ttft_s if after else None, warm.ttft_s if warm else None),
            "cached_ratio_warm": stats.cached_ratio([warm] if warm else []),
            "cached_ratio_after_restart": stats.cached_ratio(after),
            "ideal_cached_ratio_after_restart": stats.cached_ratio(after, ideal=True),
        }

    def series(self, phase: str, records: list[RequestRecord]) -> Series:
        return turn_series(records)
