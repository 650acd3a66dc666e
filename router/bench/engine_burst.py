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

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall_s

    @property
    def ttft_p50_s(self) -> float:
        return statistics.median(self.ttft_s)


@dataclass(frozen=True)
class BurstCost:
    requests: int
    generator: list[BurstRun]  # per round
    scheduler: list[BurstRun]


def _prompts(count: int, tokens: int, vocab_size: int) -> list[list[int]]:
    # Distinct from the first token (for up to vocab_size / 7 requests): none can start from another's cache.
    return [[3 + (i * 7 + j * 131) % (vocab_size - 3) for j in range(tokens)] for i in range(count)]


def _drive(step: Callable[[], list[tuple[object, int, bool]]], count: int) -> BurstRun:
    """Call ``step()`` until ``count`` requests have finished; it returns what each request
    produced in that step as (request, tokens, finished)."""
    run, seen, finished = BurstRun(), set(), 0
    start = time.perf_counter()
    while finished < count:
        produced = step()
        now = time.perf_counter() - start
        for request, tokens, done in produced:
            if tokens and request not in seen:
                seen.add(request)
                run.ttft_s.append(now)
            run.tokens += tokens
            finished += done
    run.wall_s = time.perf_counter() - start
    return run


def _time_generator(model, prompts: list[list[int]], max_tokens: int, concurrency: int, prefill_step: int) -> BurstRun:
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    generator = BatchGenerator(model, completion_batch_size=concurrency, prefill_batch_size=min(concurrency, 8),
                               prefill_step_size=prefill_step)
    greedy = make_sampler(temp=0.0)
    try:
        generator.insert(prompts, max_tokens=[max_tokens] * len(prompts), samplers=[greedy] * len(prompts))
        return _drive(lambda: [(r.uid, 1, r.finish_reason is not None) for r in generator.next()[1]], len(prompts))
    finally:
        generator.close()


def _time_scheduler(model, prompts: list[list[int]], max_tokens: int, concurrency: int, prefill_step: int) -> BurstRun:
    from engines.protocol import AddRequest, SamplingParams
    from engines.scheduler import Scheduler
    from router.bench.models import default_prefix_cache

    scheduler = Scheduler(model, max_concurrency=concurrency, prefill_step=prefill_step, max_context=65536,
                          prefix_cache=default_prefix_cache())
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


def measure(model_dir: Path | None, size: str, counts: list[int], *, prompt_tokens: int, max_tokens: int,
            concurrency: int, prefill_step: int, rounds: int) -> tuple[str, list[BurstCost]]:
    from router.bench.models import load_bench_model

    from engines.scheduler import model_vocab_size

    described, model = load_bench_model(model_dir, size)
    vocab_size = model_vocab_size(model)
    # Compile both paths' graphs at the widths ahead before anything is timed.
    warm = _prompts(min(8, concurrency), prompt_tokens, vocab_size)
    _time_generator(model, warm, 4, concurrency, prefill_step)
    _time_scheduler(model, warm, 4, concurrency, prefill_step)
    results = []
    for count in counts:
        prompts = _prompts(count, prompt_tokens, vocab_size)
        generator, scheduler = [], []
        for _ in range(rounds):
            generator.append(_time_generator(model, prompts, max_tokens, concurrency, prefill_step))
            scheduler.append(_time_scheduler(model, prompts, max_tokens, concurrency, prefill_step))
        results.append(BurstCost(count, generator, scheduler))
    return described, results


def report(described: str, results: list[BurstCost], *, prompt_tokens: int, max_tokens: int, concurrency: int,
           prefill_step: int) -> str:
    lines = [f"model {described}, {prompt_tokens}-token prompts, {max_tokens} tokens each, greedy, "
             f"{concurrency} sequences at most, prefill_step {prefill_step}", "",
             "| requests | generator tok/s (rounds) | scheduler tok/s (rounds) | scheduler / generator tok/s | "
             "generator TTFT p50 s | scheduler TTFT p50 s | scheduler / generator TTFT p50 |",
             "|---|---|---|---|---|---|---|"]
    for cost in results:
        rate = [s.tok_s / g.tok_s for s, g in zip(cost.scheduler, cost.generator)]
        ttft = [s.ttft_p50_s / g.ttft_p50_s for s, g in zip(cost.scheduler, cost.generator)]
        lines.append(
            f"| {cost.requests} | {' '.join(f'{r.tok_s:.0f}' for r in cost.generator)} | "
            f"{' '.join(f'{r.tok_s:.0f}' for r in cost.scheduler)} | {' '.join(f'{v:.3f}' for v in rate)} → "
            f"**{statistics.median(rate):.3f}** | {' '.join(f'{r.ttft_p50_s:.2f}' for r in cost.generator)} | "
            f"{' '.join(f'{r.ttft_p50_s:.2f}' for r in cost.scheduler)} | {' '.join(f'{v:.3f}' for v in ttft)} → "
            f"**{statistics.median(ttft):.3f}** |")
    return "\n".join(lines) + "\n"
