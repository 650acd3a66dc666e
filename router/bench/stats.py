"""Figures computed from raw request records: the only place numbers are derived."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable

from router.bench.client import TRANSPORT_ERROR, RequestRecord


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0-100, linear interpolation) of the values present; None if none are."""
    data = sorted(v for v in values if v is not None)
    if not data:
        return None
    rank = (len(data) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return data[low] + (data[high] - data[low]) * (rank - low)


def median(values: Iterable[float | None]) -> float | None:
    return percentile(values, 50)


def median_interval(values: Iterable[float], z: float = 1.96) -> tuple[float, float]:
    """A 95% confidence interval of the median of ``values``, from order statistics alone.

    Distribution-free (how many values fall below the median is binomial): the values ranked
    floor(n/2 - z*sqrt(n)/2) and ceil(1 + n/2 + z*sqrt(n)/2), counting from 1. It tells whether a
    median resolves a target at all: ``bench hop``'s pair differences spread by about a millisecond
    against the canned upstream, and by tens against a model sharing the machine.
    """
    ranked = sorted(values)
    half_width = z * math.sqrt(len(ranked)) / 2
    lower_rank = math.floor(len(ranked) / 2 - half_width)
    upper_rank = math.ceil(1 + len(ranked) / 2 + half_width)
    return ranked[max(0, lower_rank - 1)], ranked[min(len(ranked) - 1, upper_rank - 1)]


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def cached_ratio(records: Iterable[RequestRecord], *, ideal: bool = False) -> float | None:
    """Cached prompt tokens over prompt tokens, summed over the successful records that report usage."""
    counted = [r for r in records if r.ok and r.prompt_tokens and (r.ideal_cached_tokens if ideal else r.cached_tokens) is not None]
    return ratio(sum((r.ideal_cached_tokens if ideal else r.cached_tokens) for r in counted), sum(r.prompt_tokens for r in counted))


def status_name(record: RequestRecord) -> str:
    if record.status == TRANSPORT_ERROR:
        return "no response"
    if record.status == 200:
        return "200 (stream error)" if record.error else "200"
    return str(record.status)


def errors_by_status(records: Iterable[RequestRecord]) -> dict[str, int]:
    return dict(Counter(status_name(r) for r in records if not r.ok))


def request_figures(records: list[RequestRecord]) -> dict[str, float | None]:
    """What every workload reports: TTFT, latency, decode speed, errors."""
    ok = [r for r in records if r.ok]
    return {
        "requests": float(len(records)),
        "errors": float(len(records) - len(ok)),
        "ttft_p50_s": median(r.ttft_s for r in ok),
        "ttft_p95_s": percentile((r.ttft_s for r in ok), 95),
        "e2e_p50_s": median(r.e2e_s for r in ok),
        "decode_tok_s_p50": median(r.decode_tok_s for r in ok),
    }


def inter_token_figures(records: list[RequestRecord]) -> dict[str, float | None]:
    """Percentiles of the gaps between output events, pooled over the successful streams."""
    gaps = [gap for r in records if r.ok for gap in r.gaps_s]
    return {"itl_p50_s": median(gaps), "itl_p95_s": percentile(gaps, 95)}


def wall_s(records: list[RequestRecord]) -> float | None:
    """From the first request sent to the last one finished."""
    if not records:
        return None
    return max(r.sent_at + r.e2e_s for r in records) - min(r.sent_at for r in records)


def aggregate_tok_s(records: list[RequestRecord]) -> float | None:
    """Completion tokens of all successful requests over the wall time of all of them."""
    return ratio(float(sum(r.completion_tokens or 0 for r in records if r.ok)), wall_s(records))


def by_turn(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    turns: dict[int, list[RequestRecord]] = {}
    for record in records:
        if record.turn is not None:
            turns.setdefault(record.turn, []).append(record)
    return dict(sorted(turns.items()))


def fmean(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None]
    return statistics.fmean(data) if data else None
