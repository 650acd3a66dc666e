"""``bench hop`` against ``bench canned-upstream``: a front's own hop, measured end to end.

A real front (rapid-mlx serve, an upstream model) proxies to the canned upstream, both on loopback;
the bench runs its pairs through the CLI as the docs say. What is checked is that the numbers are
measured and consistent, not how large they are (speed is for docs/benchmarks.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest

from router.bench.targets import free_port
from tests.support.server import wait_for


def _start_canned(*extra: str):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "router.cli", "bench", "canned-upstream", "--port", str(port), *extra])
    url = f"http://127.0.0.1:{port}"

    def listening() -> bool:
        try:
            return httpx.get(url + "/v1/models", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(listening, 30, "the canned upstream to listen")
    return process, url


@pytest.fixture(scope="module")
def canned():
    process, url = _start_canned()
    yield url
    process.terminate()
    process.wait(10)


def test_the_canned_upstream_waits_gap_ms_between_the_role_frame_and_the_token():
    process, url = _start_canned("--gap-ms", "300")
    try:
        body = {"model": "coder", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        arrivals = []
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=10) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrivals.append((time.perf_counter(), line))
    finally:
        process.terminate()
        process.wait(10)
    assert '"role": "assistant"' in arrivals[0][1] and '"content": "hi"' in arrivals[1][1]
    assert arrivals[1][0] - arrivals[0][0] >= 0.25  # the token waited the gap (a lower bound only)


def test_the_canned_upstream_streams_a_chat_reply_an_sdk_reads(canned):
    import openai

    client = openai.OpenAI(base_url=canned + "/v1", api_key="unused", max_retries=0, _strict_response_validation=True)
    chunks = list(client.chat.completions.create(model="coder", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "hi"
    assert chunks[-1].choices[0].finish_reason == "length"


def test_bench_hop_measures_pairs_through_a_front(servers, canned, tmp_path):
    front = servers.start({"coder": {"upstream": canned + "/v1"}})
    out = tmp_path / "hop"
    result = subprocess.run(
        [sys.executable, "-m", "router.cli", "bench", "hop", "--direct", canned, "--front", front.base_url,
         "--model", "coder", "--pairs", "24", "--front-pid", str(front.process.pid), "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# rapid-mlx bench hop") and "24 pairs" in summary
    cpu_ms = float(re.search(r"CPU per proxied request: \*\*([\d.]+) ms", summary).group(1))
    # The front did the proxying work, counted from /proc in 10 ms clock ticks: 26 requests (two of them
    # warm-up) at 2-5 ms each span several ticks, where the 6 of an earlier version could fall inside one.
    assert cpu_ms > 0
    medians = {}
    for label in ("response headers", "first SSE frame", "first content token (TTFT)"):
        row = next(line for line in summary.splitlines() if line.startswith(f"| {label} |"))
        direct, through, difference, interval = [cell.strip().strip("*") for cell in row.split("|")[2:6]]
        medians[label] = (float(direct), float(through))
        low, high = (float(bound) for bound in interval.split(" .. "))
        assert low <= float(difference) <= high
    for direct, through in medians.values():
        assert 0 < direct and 0 < through
    # Moments in order on each side: headers, then the first frame, then the first token.
    assert medians["response headers"][1] <= medians["first SSE frame"][1] <= medians["first content token (TTFT)"][1]
