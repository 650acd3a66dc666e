"""``rapid-mlx bench engine-burst``: a burst through the worker's scheduler against mlx-lm's BatchGenerator alone.

In process, on one random-weight checkpoint: N distinct prompts arrive at once and each
decodes the same number of tokens, once through ``engines.scheduler.Scheduler`` (what the
worker runs, with its prefix cache as the server configures it by default) and once through a
bare ``BatchGenerator`` at mlx_lm.server's settings (8 prompts prefilled together, one shared
greedy sampler), alternating A and B each round. Timed from the burst's arrival to its last
token: the end-to-end rate (all tokens over that wall time) is the ceiling an HTTP server on
this engine can reach on the same burst, and the time to each request's first token is what
prefill scheduling decides, without HTTP in the way.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path



@dataclass
class BurstRun:
    wall_s: float = 0.0
    tokens: int = 0
    ttft_s: list[float] = field(default_factory=list)  # per request, from the burst's arrival
    gaps_s: list[float] = field(default_factory=list)  # between a request's consecutive tokens, all requests

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall_s

    @property
    def ttft_p50_s(self) -> float:
        return statistics.median(self.ttft_s)

    @property
    def itl_p95_s(self) -> float:
        from router.bench.stats import percentile

        return percentile(self.gaps_s, 95)


@dataclass(frozen=True)
class BurstCost:
    requests: int
    generator: list[BurstRun]  # per round
    scheduler: dict[float, list[BurstRun]]  # per prefill share, per round


@dataclass(frozen=True)
class Burst:
    """The prompts of one burst: every ``long_every``-th of them ``long_tokens`` long (0: none)."""

    prompt_tokens: int
    max_tokens: int
    long_every: int = 0
    long_tokens: int = 0

    def prompts(self, count: int, vocab_size: int) -> list[list[int]]:
        # Distinct from the first token (for up to vocab_size / 7 requests): none can start from another's cache.
        lengths = [self.long_tokens if self.long_every and i % self.long_every == 0 else self.prompt_tokens for i in range(count)]
        return [[3 + (i * 7 + j * 131) % (vocab_size - 3) for j in range(length)] for i, length in enumerate(lengths)]


def _drive(step: Callable[[], list[tuple[object, int, bool]]], count: int) -> BurstRun:
    """Call ``step()`` until ``count`` requests have finished; it returns what each request
    produced in that step as (request, tokens, finished)."""
    run, last_token_at, finished = BurstRun(), {}, 0
    start = time.perf_counter()
    while finished < count:
        produced = step()
        now = time.perf_counter() - start
        for request, tokens, done in produced:
            if tokens:
                if request in last_token_at:
                    run.gaps_s.append(now - last_token_at[request])
                else:
                    run.ttft_s.append(now)
                last_token_at[request] = now
            run.tokens += tokens
            finished += done
    run.wall_s = time.perf_counter() - start
    return run


def _time_generator(model, prompts: list[list[int]], max_tokens: int, concurrency: int, prefill_step: int) -> BurstRun:
    from router.bench.models import bare_generator

    generator = bare_generator(model, prompts, max_tokens, width=concurrency, prefill_step=prefill_step)
    try:
        return _drive(lambda: [(r.uid, 1, r.finish_reason is not None) for r in generator.next()[1]], len(prompts))
    finally:
        generator.close()


def _time_scheduler(model, prompts: list[list[int]], max_tokens: int, concurrency: int, prefill_step: int,
                    prefill_share: float) -> BurstRun:
    from engines.protocol import AddRequest, SamplingParams
    from engines.scheduler import Scheduler
    from router.bench.models import default_prefix_cache

    scheduler = Scheduler(model, max_concurrency=concurrency, prefill_step=prefill_step, max_context=65536,
                          prefix_cache=default_prefix_cache(), prefill_share=prefill_share)
    try:
        for i, prompt in enumerate(prompts):
            scheduler.add(AddRequest(f"r{i}", prompt, max_tokens, SamplingParams(temperature=0.0), []))

        def step() -> list[tuple[object, int, bool]]:
            deltas = scheduler.step().outputs
            if failed := [d for d in deltas if d.error]:
                raise RuntimeError(f"request {failed[0].request_id} failed: {failed[0].error}")
            return [(d.request_id, len(d.token_ids), d.finish_reason is not None) for d in deltas]

        return _drive(step, len(prompts))
    finally:
        scheduler.close()


def measure(model_dir: Path | None, size: str, counts: list[int], burst: Burst, *, concurrency: int, prefill_step: int,
            shares: list[float], rounds: int) -> tuple[str, list[BurstCost]]:
    from engines.scheduler import model_vocab_size
    from router.bench.models import load_bench_model

    described, model = load_bench_model(model_dir, size)
    vocab_size = model_vocab_size(model)
    # Compile both paths' graphs before anything is timed.
    warm = Burst(burst.prompt_tokens, 4).prompts(min(8, concurrency), vocab_size)
    _time_generator(model, warm, 4, concurrency, prefill_step)
    _time_scheduler(model, warm, 4, concurrency, prefill_step, shares[0])
    results = []
    for count in counts:
        prompts = burst.prompts(count, vocab_size)
        generator: list[BurstRun] = []
        scheduler: dict[float, list[BurstRun]] = {share: [] for share in shares}
        for _ in range(rounds):  # A, then B at each share, alternating round by round
            generator.append(_time_generator(model, prompts, burst.max_tokens, concurrency, prefill_step))
            for share in shares:
                scheduler[share].append(_time_scheduler(model, prompts, burst.max_tokens, concurrency, prefill_step, share))
        results.append(BurstCost(count, generator, scheduler))
    return described, results


def report(described: str, results: list[BurstCost], burst: Burst, *, concurrency: int, prefill_step: int) -> str:
    mix = f", every {burst.long_every}th {burst.long_tokens} tokens long" if burst.long_every else ""
    lines = [f"model {described}, {burst.prompt_tokens}-token prompts{mix}, {burst.max_tokens} tokens each, greedy, "
             f"{concurrency} sequences at most, prefill_step {prefill_step}; A = mlx-lm's BatchGenerator alone, "
             "B = the worker's scheduler at each prefill share; per round, then the median ratio", ""]
    for cost in results:
        g = cost.generator
        lines += [f"### {cost.requests} requests: BatchGenerator {_runs(g, 'tok_s', '.0f')} tok/s, "
                  f"TTFT p50 {_runs(g, 'ttft_p50_s', '.2f')} s, ITL p95 {_runs(g, 'itl_p95_s', '.3f')} s", "",
                  "| prefill share | tok/s | B/A tok/s | TTFT p50 s | B/A TTFT p50 | ITL p95 s | B/A ITL p95 |",
                  "|---|---|---|---|---|---|---|"]
        for share, runs in cost.scheduler.items():
            lines.append(f"| {share:g} | {_runs(runs, 'tok_s', '.0f')} | {_ratios(runs, g, 'tok_s')} | "
                         f"{_runs(runs, 'ttft_p50_s', '.2f')} | {_ratios(runs, g, 'ttft_p50_s')} | "
                         f"{_runs(runs, 'itl_p95_s', '.3f')} | {_ratios(runs, g, 'itl_p95_s')} |")
        lines.append("")
    return "\n".join(lines)


def _runs(runs: list[BurstRun], figure: str, spec: str) -> str:
    return " ".join(format(getattr(run, figure), spec) for run in runs)


def _ratios(runs: list[BurstRun], baseline: list[BurstRun], figure: str) -> str:
    values = [getattr(b, figure) / getattr(a, figure) for b, a in zip(runs, baseline)]
    return f"{' '.join(f'{v:.3f}' for v in values)} → **{statistics.median(values):.3f}**"
