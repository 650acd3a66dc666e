"""``agent``: S concurrent agent sessions of T turns, each turn resending the whole history."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from router.bench import stats
from router.bench.client import RequestRecord
from router.bench.phase import Figures, PhaseContext, Series
from router.bench.profiles import PROFILES, AgentPrefix, AgentSession, Profile


@dataclass
class AgentWorkload:
    sessions: list[int]
    turns: int
    profile: Profile
    result_tokens: int = 300
    tool_time_s: float = 0.5
    distinct_prefix: bool = False
    name: str = "agent"

    @classmethod
    def from_args(cls, args) -> AgentWorkload:
        return cls(sessions=args.sessions, turns=args.turns, profile=PROFILES[args.profile], result_tokens=args.result_tokens,
                   tool_time_s=args.tool_time, distinct_prefix=args.distinct_prefix)

    def phases(self) -> list[str]:
        return [f"sessions={s}" for s in self.sessions]

    def planned_requests(self, phase: str) -> int:
        return _session_count(phase) * self.turns

    async def run(self, ctx: PhaseContext) -> None:
        shared = AgentPrefix.build(self.profile, ctx.seed)
        count = _session_count(ctx.phase)
        await asyncio.gather(*(self._session(ctx, s, shared) for s in range(count)))

    async def _session(self, ctx: PhaseContext, number: int, shared: AgentPrefix) -> None:
        prefix = AgentPrefix.build(self.profile, ctx.seed + 7919 * (number + 1)) if self.distinct_prefix else shared
        session = AgentSession.start(prefix, self.profile, seed=ctx.seed * 31 + number)
        # Simulated tool time: seeded per session, so every target waits the same.
        pauses = random.Random(ctx.seed * 17 + number)
        for turn in range(1, self.turns + 1):
            request, prompt = session.request(ctx.client.api)
            await ctx.send(request, prompt=prompt, session=number, turn=turn)
            if turn < self.turns:
                session.add_step(self.result_tokens)
                await asyncio.sleep(pauses.uniform(0, 2 * self.tool_time_s))

    def figures(self, phase: str, records: list[RequestRecord]) -> Figures:
        first = [r for r in records if r.turn == 1]
        later = [r for r in records if r.turn is not None and r.turn >= 2]
        sessions: dict[int, list[RequestRecord]] = {}
        for record in records:
            sessions.setdefault(record.session, []).append(record)
        cached, ideal = stats.cached_ratio(later), stats.cached_ratio(later, ideal=True)
        return {
            **stats.request_figures(records),
            "ttft_turn1_p50_s": stats.median(r.ttft_s for r in first if r.ok),
            "ttft_turn1_p95_s": stats.percentile((r.ttft_s for r in first if r.ok), 95),
            "ttft_later_p50_s": stats.median(r.ttft_s for r in later if r.ok),
            "ttft_later_p95_s": stats.percentile((r.ttft_s for r in later if r.ok), 95),
            "session_wall_p50_s": stats.median(stats.wall_s(s) for s in sessions.values()),
            "cached_ratio_later": cached,
            "ideal_cached_ratio_later": ideal,
            "cached_of_ideal_later": stats.ratio(cached, ideal),
            "cached_ratio_turn1": stats.cached_ratio(first),
            "ideal_cached_ratio_turn1": stats.cached_ratio(first, ideal=True),
            "prompt_tokens_turn1_p50": stats.median(r.prompt_tokens for r in first if r.ok),
            "prompt_tokens_last_p50": stats.median(r.prompt_tokens for r in records if r.ok and r.turn == self.turns),
        }

    def series(self, phase: str, records: list[RequestRecord]) -> Series:
        return turn_series(records)


def turn_series(records: list[RequestRecord]) -> Series:
    """Per turn: median TTFT and prompt tokens, measured and ideal cached ratio."""
    turns = stats.by_turn(records)
    return {
        "turn": [float(t) for t in turns],
        "ttft_p50_s": [stats.median(r.ttft_s for r in rs if r.ok) for rs in turns.values()],
        "prompt_tokens_p50": [stats.median(r.prompt_tokens for r in rs if r.ok) for rs in turns.values()],
        "cached_ratio": [stats.cached_ratio(rs) for rs in turns.values()],
        "ideal_cached_ratio": [stats.cached_ratio(rs, ideal=True) for rs in turns.values()],
    }


def _session_count(phase: str) -> int:
    return int(phase.partition("=")[2])
