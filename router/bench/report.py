"""A bench run's files: raw JSON, a markdown summary, PNG plots."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from router.bench import stats
from router.bench.runner import BenchResult, ratios

# Figures whose B/A ratio the summary leads with, per workload (the rest follow).
HEADLINE = {
    "agent": ["ttft_turn1_p50_s", "ttft_later_p50_s", "ttft_later_p95_s", "session_wall_p50_s", "cached_ratio_later",
              "ideal_cached_ratio_later", "cached_of_ideal_later", "ttft_turn1_p95_s"],
    "burst": ["aggregate_tok_s", "ttft_p50_s", "ttft_p95_s", "itl_p95_s", "decode_tok_s_p50"],
    "tools": ["failure_rate", "outcome_ok", "calls_parsed"],
    "restart": ["ttft_warm_s", "ttft_after_restart_s", "after_restart_over_warm", "cached_ratio_after_restart"],
    "long": ["ttft_first_s", "ttft_last_s", "prompt_tokens_last"],
}


def write_report(result: BenchResult, out_dir: Path) -> list[Path]:
    """Write results.json, summary.md and the plots; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / "results.json"
    raw.write_text(json.dumps(result_json(result), indent=1))
    summary = out_dir / "summary.md"
    summary.write_text(markdown(result))
    from router.bench.plots import write_plots

    return [raw, summary, *write_plots(result, out_dir)]


def result_json(result: BenchResult) -> dict[str, Any]:
    return {
        "workload": result.workload,
        "meta": result.meta,
        "options": asdict(result.options),
        "targets": [asdict(t) for t in result.targets],
        "runs": [asdict(run) for run in result.runs],
        "ratios": {phase: ratios(result, phase) for phase in result.phases} if len(result.targets) == 2 else {},
        "records": [r.to_json() for r in result.records],
    }


def _number(value: float | None) -> str:
    if value is None:
        return "–"
    if value.is_integer() or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _ordered(result: BenchResult, names: list[str]) -> list[str]:
    lead = [n for n in HEADLINE.get(result.workload, []) if n in names]
    return lead + [n for n in names if n not in lead]


def markdown(result: BenchResult) -> str:
    meta = result.meta
    lines = [f"# rapid-mlx bench {result.workload}", "",
             f"- date: {meta['date']}", f"- command: `{meta['command']}`", f"- machine: {meta['machine']}, Python {meta['python']}",
             f"- versions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items() if v)}",
             f"- LD_PRELOAD: {meta['ld_preload'] or '-'}; OPENBLAS_CORETYPE: {meta.get('openblas_coretype') or '-'}; "
             f"ideal cached tokens from {meta['ideal_from']}",
             f"- targets: " + "; ".join(f"**{t.label}** `{t.launch or t.base_url}`" for t in result.targets),
             f"- model `{result.options.model}`, API {result.options.api}, {result.options.rounds} round(s), "
             f"max_tokens {result.options.max_tokens}", ""]
    two = len(result.targets) == 2
    for phase in result.phases:
        lines += [f"## {phase}", ""]
        if two:
            a, b = result.labels
            rows = ratios(result, phase)
            lines += [f"| figure | {a} (per round) | {b} (per round) | {b} / {a} (per round) | median ratio |", "|---|---|---|---|---|"]
            for name in _ordered(result, list(rows)):
                row = rows[name]
                lines.append(f"| {name} | {' '.join(map(_number, row[a]))} | {' '.join(map(_number, row[b]))} | "
                             f"{' '.join(map(_number, row['ratio']))} | **{_number(row['median_ratio'])}** |")
        else:
            label = result.labels[0]
            rounds = result.figures(phase, label)
            lines += ["| figure | per round | median |", "|---|---|---|"]
            for name in _ordered(result, list(rounds[0]) if rounds else []):
                values = [f.get(name) for f in rounds]
                lines.append(f"| {name} | {' '.join(map(_number, values))} | **{_number(stats.median(values))}** |")
        lines.append("")
    problems = _problems(result)
    lines += ["## Errors", ""] + (problems or ["none"]) + [""]
    return "\n".join(lines)


def _problems(result: BenchResult) -> list[str]:
    lines = []
    for run in result.failures():
        what = run.failure or f"the server exited on its own (exit code {run.exit_code})"
        lines.append(f"- {run.target}, {run.phase}, round {run.round}: {what.splitlines()[0]}")
    for label in result.labels:
        failed = [r for r in result.records if r.target == label]
        counts = stats.errors_by_status(failed)
        if counts:
            sample = next(r.error for r in failed if not r.ok)
            lines.append(f"- {label}: {sum(counts.values())} failed requests by status {counts}; first: {sample}")
    return lines
