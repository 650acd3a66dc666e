"""PNG plots of a bench run, drawn from its figures and series (medians over rounds)."""

from __future__ import annotations

from pathlib import Path

from router.bench import stats
from router.bench.runner import BenchResult
from router.bench.workloads.tools import OUTCOMES


def write_plots(result: BenchResult, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    drawers = {
        "agent": [_ttft_by_turn, _cached_by_turn, _against_concurrency],
        "restart": [_ttft_by_turn, _cached_by_turn],
        "long": [_ttft_by_context],
        "burst": [_against_concurrency],
        "tools": [_tool_outcomes],
    }
    written = []
    for draw in drawers.get(result.workload, []):
        figure = draw(result, plt)
        if figure is None:
            continue
        name, fig = figure
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _rounds_median(result: BenchResult, phase: str, target: str, key: str) -> tuple[list[float], list[float | None]]:
    """x (turn) and the median over rounds of ``key`` at each x."""
    runs = [r.series for r in result.runs if r.phase == phase and r.target == target and r.series.get("turn")]
    if not runs:
        return [], []
    longest = max(runs, key=lambda s: len(s["turn"]))
    xs = longest["turn"]
    values = [stats.median(s[key][i] for s in runs if i < len(s[key])) for i in range(len(xs))]
    return xs, values


def _panels(plt, count: int):
    fig, axes = plt.subplots(1, count, figsize=(5 * count, 3.8), squeeze=False)
    return fig, axes[0]


def _ttft_by_turn(result: BenchResult, plt):
    fig, axes = _panels(plt, len(result.phases))
    for ax, phase in zip(axes, result.phases):
        for label in result.labels:
            xs, ys = _rounds_median(result, phase, label, "ttft_p50_s")
            ax.plot(xs, ys, marker="o", label=label)
        ax.set(title=f"{result.workload} {phase}", xlabel="turn", ylabel="TTFT p50 (s)")
        ax.set_ylim(bottom=0)
        ax.legend()
    return "ttft_by_turn.png", fig


def _cached_by_turn(result: BenchResult, plt):
    fig, axes = _panels(plt, len(result.phases))
    for ax, phase in zip(axes, result.phases):
        for label in result.labels:
            xs, ys = _rounds_median(result, phase, label, "cached_ratio")
            line = ax.plot(xs, ys, marker="o", label=f"{label} (usage)")[0]
            xs, ideal = _rounds_median(result, phase, label, "ideal_cached_ratio")
            ax.plot(xs, ideal, linestyle="--", color=line.get_color(), alpha=0.6, label=f"{label} ideal")
        ax.set(title=f"cached prompt tokens, {phase}", xlabel="turn", ylabel="cached / prompt tokens", ylim=(0, 1.05))
        ax.legend(fontsize="small")
    return "cached_ratio_by_turn.png", fig


def _against_concurrency(result: BenchResult, plt):
    if len(result.phases) < 2:
        return None
    keys = {"agent": ("ttft_later_p50_s", "session_wall_p50_s"), "burst": ("aggregate_tok_s", "ttft_p50_s")}[result.workload]
    level = [float(p.partition("=")[2]) for p in result.phases]
    fig, axes = _panels(plt, len(keys))
    for ax, key in zip(axes, keys):
        for label in result.labels:
            ys = [stats.median(f.get(key) for f in result.figures(phase, label)) for phase in result.phases]
            ax.plot(level, ys, marker="o", label=label)
        ax.set(title=key, xlabel="sessions" if result.workload == "agent" else "concurrent requests", xscale="log", xticks=level)
        ax.set_xticklabels([f"{x:g}" for x in level])
        ax.set_ylim(bottom=0)
        ax.legend()
    return f"{result.workload}_concurrency.png", fig


def _ttft_by_context(result: BenchResult, plt):
    fig, axes = _panels(plt, 1)
    for label in result.labels:
        for phase in result.phases:
            xs, tokens = _rounds_median(result, phase, label, "prompt_tokens_p50")
            _, ttft = _rounds_median(result, phase, label, "ttft_p50_s")
            axes[0].plot(tokens, ttft, marker="o", label=label)
    axes[0].set(title="TTFT as the context grows", xlabel="prompt tokens", ylabel="TTFT p50 (s)")
    axes[0].legend()
    return "ttft_by_context.png", fig


def _tool_outcomes(result: BenchResult, plt):
    fig, axes = _panels(plt, len(result.phases))
    width = 0.8 / max(1, len(result.labels))
    for ax, phase in zip(axes, result.phases):
        for offset, label in enumerate(result.labels):
            counts = [sum(f.get(f"outcome_{name}") or 0 for f in result.figures(phase, label)) for name in OUTCOMES]
            ax.bar([i + offset * width for i in range(len(OUTCOMES))], counts, width, label=label)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(OUTCOMES))], OUTCOMES, rotation=30, ha="right")
        ax.set(title=f"tool-call outcomes, {phase}", ylabel="requests (all rounds)")
        ax.legend()
    return "tool_outcomes.png", fig
