"""Run a workload against one or two targets, phase by phase, alternating targets each round.

For every phase, round r runs target A then target B (A B A B ...), each on a freshly
started server when launched, with the same content seed for both: the two sides see the
same requests, and drift in the machine shows as spread between rounds, not as a win.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from engines.cpu_blas import choose_cpu_blas
from router.bench import stats
from router.bench.client import Api, BenchClient, RequestRecord
from router.bench.ideal import PromptTokenizer, fill_ideal
from router.bench.phase import Figures, PhaseContext, Series, Workload
from router.bench.targets import TargetError, TargetSpec, serving


@dataclass(frozen=True)
class BenchOptions:
    model: str
    api: Api = "openai"
    rounds: int = 1
    max_tokens: int = 32
    sampling: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    ready_timeout_s: float = 600.0
    request_timeout_s: float = 600.0


@dataclass
class PhaseRun:
    """One (phase, round, target): its figures and what went wrong, if anything."""

    target: str
    phase: str
    round: int
    figures: Figures
    series: Series
    errors_by_status: dict[str, int] = field(default_factory=dict)
    failure: str | None = None  # the server did not start, or the workload could not run on it
    exit_code: int | None = None  # of a launched server that exited on its own during the phase


@dataclass
class BenchResult:
    workload: str
    targets: list[TargetSpec]
    options: BenchOptions
    runs: list[PhaseRun]
    records: list[RequestRecord]
    meta: dict[str, Any]

    @property
    def labels(self) -> list[str]:
        return [t.label for t in self.targets]

    @property
    def phases(self) -> list[str]:
        return list(dict.fromkeys(run.phase for run in self.runs))

    def request_errors(self) -> int:
        return sum(1 for r in self.records if not r.ok)

    def failures(self) -> list[PhaseRun]:
        return [run for run in self.runs if run.failure or run.exit_code is not None]

    def figures(self, phase: str, target: str) -> list[Figures]:
        """That target's figures in that phase, one per round."""
        return [run.figures for run in self.runs if run.phase == phase and run.target == target]


def phase_seed(seed: int, phase_index: int, round_index: int) -> int:
    return seed * 1_000_003 + phase_index * 1009 + round_index


def _file_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


async def run_bench(workload: Workload, targets: list[TargetSpec], options: BenchOptions, out_dir: Path, *,
                    tokenizer: PromptTokenizer | None = None,
                    on_record: Callable[[RequestRecord], None] = lambda record: None,
                    on_skipped: Callable[[int], None] = lambda count: None) -> BenchResult:
    runs: list[PhaseRun] = []
    records: list[RequestRecord] = []
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    for phase_index, phase in enumerate(workload.phases()):
        for round_index in range(options.rounds):
            for spec in targets:
                log_path = out_dir / "logs" / f"{_file_part(spec.label)}-{_file_part(phase)}-r{round_index + 1}.log"
                context: PhaseContext | None = None
                failure, exit_code = None, None
                try:
                    async with serving(spec, log_path, model=options.model, api=options.api,
                                       ready_timeout_s=options.ready_timeout_s) as server:
                        async with httpx.AsyncClient(base_url=server.base_url, timeout=options.request_timeout_s, limits=limits) as http:
                            context = PhaseContext(
                                target=spec.label, phase=phase, round=round_index + 1,
                                seed=phase_seed(options.seed, phase_index, round_index),
                                client=BenchClient(http, api=options.api, model=options.model), server=server,
                                max_tokens=options.max_tokens, sampling=options.sampling, on_record=on_record)
                            await workload.run(context)
                        exit_code = server.died()
                except TargetError as exc:
                    failure = str(exc)
                phase_records = context.records if context else []
                on_skipped(max(0, workload.planned_requests(phase) - len(phase_records)))
                if context is not None:
                    fill_ideal(phase_records, context.prompts, tokenizer)
                records += phase_records
                runs.append(PhaseRun(spec.label, phase, round_index + 1, workload.figures(phase, phase_records),
                                     workload.series(phase, phase_records), stats.errors_by_status(phase_records), failure, exit_code))
    return BenchResult(workload.name, targets, options, runs, records, run_meta(tokenizer))


def run_meta(tokenizer: PromptTokenizer | None) -> dict[str, Any]:
    """Where and with what the numbers were measured."""
    from importlib import metadata

    versions = {}
    for package in ("rapid-mlx", "mlx", "mlx-lm"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    server_env = {**os.environ, **choose_cpu_blas("auto").worker_env(os.environ)}
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": shlex.join(sys.argv),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {_memory_gib()}",
        "python": platform.python_version(),
        "versions": versions,
        # What the servers it launches run with (targets.py gives them the BLAS our workers would get).
        "ld_preload": server_env.get("LD_PRELOAD"),
        "openblas_coretype": server_env.get("OPENBLAS_CORETYPE"),
        "ideal_from": "tokenizer" if tokenizer is not None else "usage of the previous turn",
    }


def _memory_gib() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return "memory unknown"  # not every platform exposes physical memory through sysconf
    return f"{pages * size / 2**30:.0f} GiB"


def ratios(result: BenchResult, phase: str) -> dict[str, dict[str, Any]]:
    """Per figure of a two-target run: each round's A and B values, B/A per round and its median."""
    a, b = result.labels
    rows: dict[str, dict[str, Any]] = {}
    a_rounds, b_rounds = result.figures(phase, a), result.figures(phase, b)
    for name in (a_rounds or b_rounds or [{}])[0]:
        a_values = [f.get(name) for f in a_rounds]
        b_values = [f.get(name) for f in b_rounds]
        per_round = [stats.ratio(y, x) for x, y in zip(a_values, b_values)]
        rows[name] = {a: a_values, b: b_values, "ratio": per_round, "median_ratio": stats.median(per_round)}
    return rows
