"""``bench hop``: what one upstream hop adds to time to first token, measured in pairs.

Each pair sends the same streamed chat request to the upstream directly and through the front that
proxies to it, back to back (which goes first alternates), both on kept-alive connections. A pair's
difference cancels most of what a shared machine adds to both; the report gives each side's median
and the median and spread of the differences, for three moments: response headers, the first SSE
frame, and the first content token.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from router.bench.stats import median_interval

__all__ = ["HopTimes", "cpu_seconds", "hop_report", "measure_hop"]


@dataclass(frozen=True)
class HopTimes:
    headers_s: float
    first_frame_s: float
    first_token_s: float


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used (Linux /proc): what the front spends, whatever the load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _one(client: httpx.Client, url: str, body: dict) -> HopTimes:
    started = time.perf_counter()
    with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        headers = time.perf_counter() - started
        first_frame = first_token = None
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            now = time.perf_counter() - started
            first_frame = first_frame or now
            delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
            if first_token is None and (delta.get("content") or delta.get("reasoning_content")):
                first_token = now
    return HopTimes(headers, first_frame or headers, first_token or first_frame or headers)


def measure_hop(direct_url: str, direct_model: str, front_url: str, front_model: str, *, pairs: int,
                prompt_words: int = 60, max_tokens: int = 4, timeout_s: float = 120.0) -> list[tuple[HopTimes, HopTimes]]:
    """``pairs`` (direct, front) timings; prompts differ per pair, equal within one."""
    results = []
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        for index in range(pairs + 2):  # the first two warm both paths' connections and are dropped
            prompt = " ".join(f"word{(index * 7919 + i) % 1000}" for i in range(prompt_words))
            body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0,
                    "stream": True}
            order = [("direct", direct_url, direct_model), ("front", front_url, front_model)]
            if index % 2:
                order.reverse()
            times = {name: _one(client, url.rstrip("/") + "/v1/chat/completions", {**body, "model": model})
                     for name, url, model in order}
            if index >= 2:
                results.append((times["direct"], times["front"]))
    return results


def hop_report(results: list[tuple[HopTimes, HopTimes]], front_cpu_s: float | None = None) -> str:
    lines = [f"{len(results)} pairs, order alternating; milliseconds", ""]
    if front_cpu_s is not None:
        # /proc counts whole clock ticks, so a short run can read 0 ms: the resolution says how short is too short.
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        lines += [f"front process CPU per proxied request: **{1000 * front_cpu_s / len(results):.2f} ms** "
                  f"({front_cpu_s:.2f} s over {len(results)} requests, every byte of their streams included; "
                  f"resolution {tick_ms / len(results):.2f} ms, one {tick_ms:.0f} ms clock tick over the run)", ""]
    lines += ["| moment | direct median | through the front median | difference median | its 95% interval | difference p10 / p90 |",
              "|---|---|---|---|---|---|"]
    for field, label in (("headers_s", "response headers"), ("first_frame_s", "first SSE frame"),
                         ("first_token_s", "first content token (TTFT)")):
        direct = [getattr(d, field) * 1000 for d, _ in results]
        front = [getattr(f, field) * 1000 for _, f in results]
        diffs = sorted(b - a for a, b in zip(direct, front))
        p10, p90 = diffs[len(diffs) // 10], diffs[(len(diffs) * 9) // 10]
        low, high = median_interval(diffs)
        lines.append(f"| {label} | {statistics.median(direct):.2f} | {statistics.median(front):.2f} | "
                     f"**{statistics.median(diffs):+.2f}** | {low:+.2f} .. {high:+.2f} | {p10:+.2f} / {p90:+.2f} |")
    return "\n".join(lines) + "\n"
