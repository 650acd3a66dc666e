"""``rapid-mlx bench step``: the worker's scheduler step against mlx-lm's BatchGenerator alone.

In process, on one random-weight checkpoint: N sequences of the same prompts decode the same
number of tokens, once through ``engines.scheduler.Scheduler.step`` (what the worker runs:
admission, sampling per request, output collection, deltas) and once through a bare
``BatchGenerator.next`` with a shared greedy sampler and no stop checks beyond max_tokens,
alternating A and B for each round. Only decode steps are timed (every sequence past its
prefill), so the figure is the per-step overhead the scheduler adds to the generator.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROMPT_TOKENS = 64
# Prompts are prefilled 8 at a time, so the first ones decode for a few steps before the
# last join: they get this many tokens beyond the timed steps.
LAG_TOKENS = 16


@dataclass(frozen=True)
class StepCost:
    sequences: int
    generator_ms: list[float]  # per round
    scheduler_ms: list[float]

    @property
    def ratios(self) -> list[float]:
        return [s / g for s, g in zip(self.scheduler_ms, self.generator_ms)]


def _prompts(count: int) -> list[list[int]]:
    return [[3 + (i * 131 + j * 17) % 400 for j in range(PROMPT_TOKENS)] for i in range(count)]


def _ms_per_decode_step(step: Callable[[], list], count: int) -> float:
    """Mean wall time of ``step()`` from when all ``count`` sequences decode until one finishes
    (``step`` returns what each sequence produced, each with a ``finish_reason``)."""
    timed, start = 0, None
    while True:
        produced = step()
        if len(produced) == count and start is None:
            start = time.perf_counter()  # every sequence decodes from here
        elif start is not None:
            timed += 1
        if any(item.finish_reason for item in produced):
            if not timed:
                raise RuntimeError("a sequence finished before all of them decoded: give them more tokens")
            return 1000 * (time.perf_counter() - start) / timed


def _time_generator(model, count: int, steps: int) -> float:
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    generator = BatchGenerator(model, completion_batch_size=count, prefill_batch_size=min(count, 8), prefill_step_size=512)
    greedy = make_sampler(temp=0.0)
    generator.insert(_prompts(count), max_tokens=[steps + LAG_TOKENS] * count, samplers=[greedy] * count)
    try:
        return _ms_per_decode_step(lambda: generator.next()[1], count)
    finally:
        generator.close()


def _time_scheduler(model, count: int, steps: int) -> float:
    from engines.protocol import AddRequest, SamplingParams
    from engines.scheduler import Scheduler

    scheduler = Scheduler(model, max_concurrency=count, prefill_step=512, max_context=4096)
    for i, prompt in enumerate(_prompts(count)):
        scheduler.add(AddRequest(f"r{i}", prompt, steps + LAG_TOKENS, SamplingParams(temperature=0.0), []))
    try:
        return _ms_per_decode_step(lambda: scheduler.step().outputs, count)
    finally:
        scheduler.close()


def measure(model_dir: Path | None, size: str, counts: list[int], steps: int, rounds: int) -> tuple[str, list[StepCost]]:
    from mlx_lm.utils import load_model

    from router.bench.models import make_model, parameter_count

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model_dir) if model_dir else make_model(Path(tmp) / "m", size=size)
        described = f"{path.name if model_dir else size} ({parameter_count(path) / 1e6:.1f}M parameters)"
        model, _ = load_model(path)
    results = []
    for count in counts:
        _time_generator(model, count, 4)  # warm up both paths' compiled graphs at this width
        _time_scheduler(model, count, 4)
        generator, scheduler = [], []
        for _ in range(rounds):
            generator.append(_time_generator(model, count, steps))
            scheduler.append(_time_scheduler(model, count, steps))
        results.append(StepCost(count, generator, scheduler))
    return described, results


def report(described: str, results: list[StepCost], steps: int) -> str:
    lines = [f"model {described}, {PROMPT_TOKENS}-token prompts, {steps} decode steps timed per run, greedy", "",
             "| sequences | BatchGenerator ms/step (rounds) | scheduler ms/step (rounds) | scheduler / generator (rounds) | median |",
             "|---|---|---|---|---|"]
    for cost in results:
        lines.append(f"| {cost.sequences} | {' '.join(f'{v:.2f}' for v in cost.generator_ms)} | "
                     f"{' '.join(f'{v:.2f}' for v in cost.scheduler_ms)} | {' '.join(f'{r:.3f}' for r in cost.ratios)} | "
                     f"**{statistics.median(cost.ratios):.3f}** |")
    return "\n".join(lines) + "\n"
