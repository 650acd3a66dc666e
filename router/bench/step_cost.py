"""``rapid-mlx bench step``: the worker's scheduler step against mlx-lm's BatchGenerator alone.

In process, on one random-weight checkpoint: N sequences of the same prompts decode the same
number of tokens, once through ``engines.scheduler.Scheduler.step`` (what the worker runs:
admission, sampling per request, output collection, deltas) and once through a bare
``BatchGenerator.next`` with a shared greedy sampler and no stop checks beyond max_tokens,
alternating A and B for each round. Only decode steps are timed (every sequence past its
prefill), so the figure is the per-step overhead the scheduler adds to the generator.
"""

from __future__ import annotations

import contextlib
import cProfile
import pstats
import statistics
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


def _ms_per_decode_step(step: Callable[[], list], count: int, profiler: cProfile.Profile | None = None) -> tuple[float, int]:
    """Mean wall time of ``step()`` from when all ``count`` sequences decode until one finishes
    (``step`` returns what each sequence produced, each with a ``finish_reason``), and how many
    steps were timed; ``profiler`` runs over the timed steps alone."""
    timed, start = 0, None
    while True:
        produced = step()
        if len(produced) == count and start is None:
            start = time.perf_counter()  # every sequence decodes from here
            if profiler is not None:
                profiler.enable()
        elif start is not None:
            timed += 1
        if any(item.finish_reason for item in produced):
            if profiler is not None:
                profiler.disable()
            if not timed:
                raise RuntimeError("a sequence finished before all of them decoded: give them more tokens")
            return 1000 * (time.perf_counter() - start) / timed, timed


def _time_generator(model, count: int, steps: int) -> float:
    from router.bench.models import bare_generator

    generator = bare_generator(model, _prompts(count), steps + LAG_TOKENS, width=count, prefill_step=512)
    try:
        return _ms_per_decode_step(lambda: generator.next()[1], count)[0]
    finally:
        generator.close()


def _time_scheduler(model, count: int, steps: int, profiler: cProfile.Profile | None = None) -> tuple[float, int]:
    """The worker's step: the scheduler (with the prefix cache the server has by default) and
    the encoding of the frame the worker sends for each step."""
    from engines.protocol import AddRequest, SamplingParams, encode_frame
    from engines.scheduler import Scheduler
    from router.bench.models import default_prefix_cache

    scheduler = Scheduler(model, max_concurrency=count, prefill_step=512, max_context=4096,
                          prefix_cache=default_prefix_cache())
    for i, prompt in enumerate(_prompts(count)):
        scheduler.add(AddRequest(f"r{i}", prompt, steps + LAG_TOKENS, SamplingParams(temperature=0.0), []))

    def step() -> list:
        outputs = scheduler.step()
        encode_frame(outputs)
        return outputs.outputs

    try:
        return _ms_per_decode_step(step, count, profiler)
    finally:
        scheduler.close()


def measure(model_dir: Path | None, size: str, counts: list[int], steps: int, rounds: int) -> tuple[str, list[StepCost]]:
    from router.bench.models import load_bench_model

    described, model = load_bench_model(model_dir, size)
    results = []
    for count in counts:
        _time_generator(model, count, 4)  # warm up both paths' compiled graphs at this width
        _time_scheduler(model, count, 4)
        generator, scheduler = [], []
        for _ in range(rounds):
            generator.append(_time_generator(model, count, steps))
            scheduler.append(_time_scheduler(model, count, steps)[0])
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


# Where the engine thread's time goes, by who spends it (a function's own time, so nothing
# counts twice). Checked in order; the first match names the category.
_CATEGORIES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("host syncs: reading back the step's tokens and logprobs (mx.eval)", lambda file, name: name == "_device_wait"),
    ("device work: the next step's forward pass and sampling (mx.async_eval; on MLX's CPU backend "
     "it returns once the work is done)", lambda file, name: name == "_device_launch"),
    ("model forward: building the graph in Python", lambda file, name: "/mlx_lm/models/" in file or "/mlx/nn/" in file),
    ("sampling and logits processors", lambda file, name: "sample_utils" in file or file.endswith("engines/sampling.py")),
    ("mlx-lm generator: stop checks, responses, batch bookkeeping", lambda file, name: file.endswith("mlx_lm/generate.py")),
    ("scheduler: output collection, admission", lambda file, name: file.endswith("engines/scheduler.py")),
    ("prefix cache", lambda file, name: "/caches/" in file),
    ("frame encoding", lambda file, name: file.endswith("engines/protocol.py") or "msgspec" in name),
    ("other mlx calls", lambda file, name: file == "~" and "mlx" in name),
]


@contextlib.contextmanager
def _device_calls_visible():
    """Route mx.eval and mx.async_eval through Python functions while profiling: cProfile does
    not see MLX's native functions, so their time would count as their callers' own."""
    import mlx.core as mx

    evaluate, launch = mx.eval, mx.async_eval

    def _device_wait(*args):
        return evaluate(*args)

    def _device_launch(*args):
        return launch(*args)

    mx.eval, mx.async_eval = _device_wait, _device_launch
    try:
        yield
    finally:
        mx.eval, mx.async_eval = evaluate, launch


def _categorize(stats: pstats.Stats, steps: int) -> dict[str, float]:
    """Own time per category in ms per step."""
    spent: dict[str, float] = {}
    for (file, _, name), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        category = next((label for label, match in _CATEGORIES if match(file, name)), "other Python")
        spent[category] = spent.get(category, 0.0) + own
    return {label: 1000 * seconds / steps for label, seconds in sorted(spent.items(), key=lambda item: -item[1])}


def profile(model_dir: Path | None, size: str, counts: list[int], steps: int) -> str:
    """A cProfile of the worker's step at each width: ms per decode step by category."""
    from router.bench.models import load_bench_model

    described, model = load_bench_model(model_dir, size)
    lines = [f"model {described}, {PROMPT_TOKENS}-token prompts, {steps} decode steps profiled per width, greedy, "
             "the worker's step (scheduler with the default prefix cache, frame encoding); own time per category, "
             "ms per step under cProfile (which slows Python, not the device); MLX's native calls count in "
             "the Python function that makes them (the graph ops in the model's code), except mx.eval and "
             "mx.async_eval, timed on their own", ""]
    for count in counts:
        _time_scheduler(model, count, 4)  # compile this width's graphs first
        profiler = cProfile.Profile()
        with _device_calls_visible():
            wall_ms, timed = _time_scheduler(model, count, steps, profiler)
        shares = _categorize(pstats.Stats(profiler), timed)
        lines += [f"### {count} sequences: {wall_ms:.2f} ms a step under the profiler", "", "| where | ms/step | share |", "|---|---|---|"]
        total = sum(shares.values())
        lines += [f"| {label} | {ms:.2f} | {100 * ms / total:.0f}% |" for label, ms in shares.items()]
        lines.append("")
    return "\n".join(lines)
