"""``rapid-mlx bench`` against live servers: every workload, --compare with mlx_lm.server, a dying server.

Each run's figures are recomputed here from the raw per-request records in results.json,
so a figure that does not follow from the data fails, whatever the server's speed.
"""

from __future__ import annotations

import json
import math
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engines.demo import build
from router.bench.cli import main as bench_main
from router.cli import DEMO_MODEL_OPTIONS

pytestmark = pytest.mark.slow

DEMO = {"path": str(build.ARTIFACT_DIR), "aliases": ["default_model"], **DEMO_MODEL_OPTIONS}
QUICK = ["--profile", "tiny", "--max-tokens", "8"]


@pytest.fixture(scope="module")
def server(servers):
    return servers.start({"demo": DEMO})


def bench(*argv: str) -> tuple[int, dict]:
    out = Path(argv[argv.index("--out") + 1])
    code = bench_main(list(argv))
    return code, json.loads((out / "results.json").read_text())


def _ok(record: dict) -> bool:
    return record["status"] == 200 and record["error"] is None


def _median(values) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _ratio_of_sums(records: list[dict], key: str) -> float | None:
    counted = [r for r in records if _ok(r) and r["prompt_tokens"] and r[key] is not None]
    total = sum(r["prompt_tokens"] for r in counted)
    return sum(r[key] for r in counted) / total if total else None


def check_figures(results: dict) -> None:
    """Every figure finite, and the ones recomputed here equal to what the raw records give."""
    for run in results["runs"]:
        records = [r for r in results["records"]
                   if (r["target"], r["phase"], r["round"]) == (run["target"], run["phase"], run["round"])]
        figures = run["figures"]
        assert all(v is None or math.isfinite(v) for v in figures.values()), figures
        ok = [r for r in records if _ok(r)]
        assert figures["requests"] == len(records) and figures["errors"] == len(records) - len(ok)
        assert figures["ttft_p50_s"] == pytest.approx(_median(r["ttft_s"] for r in ok))
        assert figures["e2e_p50_s"] == pytest.approx(_median(r["e2e_s"] for r in ok))
        if results["workload"] == "agent":
            later = [r for r in records if r["turn"] >= 2]
            assert figures["ttft_later_p50_s"] == pytest.approx(_median(r["ttft_s"] for r in later if _ok(r)))
            assert figures["cached_ratio_later"] == pytest.approx(_ratio_of_sums(later, "cached_tokens"))
            assert figures["ideal_cached_ratio_later"] == pytest.approx(_ratio_of_sums(later, "ideal_cached_tokens"))
        if results["workload"] == "burst":
            wall = max(r["sent_at"] + r["e2e_s"] for r in records) - min(r["sent_at"] for r in records)
            assert figures["aggregate_tok_s"] == pytest.approx(sum(r["completion_tokens"] for r in ok) / wall)


def test_agent_sessions_through_the_openai_api(server, tmp_path):
    code, results = bench("agent", "--base-url", server.base_url + "/v1", "--model", "demo", "--sessions", "1,2",
                          "--turns", "3", "--tool-time", "0.05", "--tokenizer", str(build.ARTIFACT_DIR), *QUICK,
                          "--out", str(tmp_path))
    assert code == 0
    check_figures(results)
    records = results["records"]
    assert len(records) == (1 + 2) * 3 and all(_ok(r) for r in records)
    assert {(r["session"], r["turn"]) for r in records if r["phase"] == "sessions=2"} == {(s, t) for s in (0, 1) for t in (1, 2, 3)}
    # Each turn resends the history: the prompt grows turn by turn, and a perfect cache could reuse most of it.
    for session in (0, 1):
        prompts = [r["prompt_tokens"] for r in sorted(records, key=lambda r: r["turn"])
                   if r["phase"] == "sessions=2" and r["session"] == session]
        assert prompts == sorted(prompts) and prompts[0] < prompts[-1]
    assert all(0.5 < r["ideal_cached_tokens"] / r["prompt_tokens"] < 1 for r in records if r["turn"] >= 2)
    # The second of two sessions that share a system prompt could reuse it on its first turn.
    assert max(r["ideal_cached_tokens"] for r in records if r["phase"] == "sessions=2" and r["turn"] == 1) > 0
    for name in ("results.json", "summary.md", "ttft_by_turn.png", "cached_ratio_by_turn.png", "agent_concurrency.png"):
        assert (tmp_path / name).stat().st_size > 0
    summary = (tmp_path / "summary.md").read_text()
    assert "## sessions=2" in summary and "| ttft_later_p50_s |" in summary and "## Errors\n\nnone" in summary


def test_distinct_prefixes_share_nothing_on_turn_one(server, tmp_path):
    code, results = bench("agent", "--base-url", server.base_url, "--model", "demo", "--sessions", "2", "--turns", "1",
                          "--distinct-prefix", "--tokenizer", str(build.ARTIFACT_DIR), *QUICK, "--out", str(tmp_path))
    assert code == 0
    # Only the chat template's opening tokens are common to two sessions' first prompts.
    assert all(r["ideal_cached_tokens"] < 0.05 * r["prompt_tokens"] for r in results["records"])


def test_agent_sessions_through_the_anthropic_api(server, tmp_path):
    code, results = bench("agent", "--base-url", server.base_url, "--api", "anthropic", "--model", "demo", "--sessions", "1",
                          "--turns", "2", "--tool-time", "0", *QUICK, "--out", str(tmp_path))
    assert code == 0
    check_figures(results)
    records = results["records"]
    assert all(_ok(r) and r["ttft_s"] > 0 and r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in records)
    # Without a tokenizer, turn 2's ideal is turn 1's prompt as the server counted it.
    first, second = sorted(records, key=lambda r: r["turn"])
    assert second["ideal_cached_tokens"] == first["prompt_tokens"] and first["ideal_cached_tokens"] is None


def test_burst(server, tmp_path):
    code, results = bench("burst", "--base-url", server.base_url, "--model", "demo", "--n", "1,4", "--max-tokens", "16",
                          "--ignore-eos", "--tokenizer", str(build.ARTIFACT_DIR), "--prompt-tokens", "50", "--out", str(tmp_path))
    assert code == 0
    check_figures(results)
    # EOS biased away: every request decodes exactly max_tokens.
    assert [r["completion_tokens"] for r in results["records"]] == [16] * 5
    assert (tmp_path / "burst_concurrency.png").stat().st_size > 0


def test_tools_counts_outcomes_whole_and_streamed(server, tmp_path):
    cases = tmp_path / "cases.jsonl"
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name."}},
                              "required": ["city"]}}}
    lines = [{"messages": [{"role": "user", "content": "What is the weather in Lisbon?"}], "tools": [weather], "expect": "get_weather"},
             # A tool the server was not offered cannot be called: this case must count as a failure.
             {"messages": [{"role": "user", "content": "What is the weather in Lisbon?"}], "tools": [weather], "expect": "web_search"}]
    cases.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    code, results = bench("tools", "--base-url", server.base_url, "--model", "demo", "--cases", str(cases), "--out", str(tmp_path / "run"))
    assert code == 0
    check_figures(results)
    for run in results["runs"]:
        figures = run["figures"]
        assert figures["outcome_ok"] == 1 and figures["outcome_wrong_tool"] == 1 and figures["failure_rate"] == 0.5
        assert figures["calls_parsed"] == 2
    assert {run["phase"] for run in results["runs"]} == {"stream", "whole"}
    assert all(r["ttft_s"] is None for r in results["records"] if not r["stream"])
    assert (tmp_path / "run" / "tool_outcomes.png").stat().st_size > 0


def test_tools_defaults_to_the_demo_models_own_tool_prompts(server, tmp_path):
    code, results = bench("tools", "--base-url", server.base_url, "--model", "demo", "--limit", "4", "--api", "anthropic",
                          "--out", str(tmp_path))
    assert code == 0
    assert sum(run["figures"]["outcome_ok"] for run in results["runs"]) >= 6  # the demo calls its tools (4 cases x 2 modes)


def test_long_grows_one_session(server, tmp_path):
    code, results = bench("long", "--base-url", server.base_url, "--model", "demo", "--profile", "tiny", "--to", "3000",
                          "--step", "300", "--max-tokens", "4", "--out", str(tmp_path))
    assert code == 0
    check_figures(results)
    prompts = [r["prompt_tokens"] for r in sorted(results["records"], key=lambda r: r["turn"])]
    assert len(prompts) >= 3 and prompts == sorted(prompts) and prompts[-1] + 300 > 3000
    assert (tmp_path / "ttft_by_context.png").stat().st_size > 0


def _demo_config(tmp_path: Path, name: str) -> Path:
    import tomli_w

    config = tmp_path / f"{name}.toml"
    config.write_text(tomli_w.dumps({"server": {"runtime_dir": str(tmp_path / f"run-{name}"), "offline": True},
                                     "models": {"demo": DEMO}}))
    return config


def _rapid_launch(tmp_path: Path, name: str) -> str:
    return f"{shlex.quote(sys.executable)} -m router.cli serve --config {_demo_config(tmp_path, name)} --port {{port}}"


@pytest.mark.parametrize("kill", [False, True])
def test_restart_stops_and_starts_a_launched_server(tmp_path, kill):
    code, results = bench("restart", "--launch", _rapid_launch(tmp_path, "restart"), "--model", "demo", *QUICK,
                          *(["--kill"] if kill else []), "--out", str(tmp_path / "run"))
    assert code == 0
    records = sorted(results["records"], key=lambda r: r["turn"])
    assert [r["labels"]["after_restart"] for r in records] == [False, False, True] and all(_ok(r) for r in records)
    figures = results["runs"][0]["figures"]
    assert figures["ttft_after_restart_s"] == records[2]["ttft_s"] and figures["ttft_warm_s"] == records[1]["ttft_s"]
    # rapid-mlx's prefix cache is on disk: the turn after the restart hits its whole prefix (a stop
    # flushes the writes). A crash keeps what the writer had written: at least turn 1's prefix,
    # written while turn 2 ran; turn 2's own may still have been queued (0.43 seen under load).
    assert figures["cached_ratio_after_restart"] > (0.0 if kill else 0.5)
    log = (tmp_path / "run" / "logs" / f"server-{'crash' if kill else 'restart'}-r1.log").read_text()
    first_run = log.split("$ ")[1]
    assert log.count("$ ") == 2  # two starts
    assert ("Application shutdown complete" in first_run) is not kill  # a graceful stop, or none at all


def test_restart_needs_a_launched_server(server, tmp_path):
    code, results = bench("restart", "--base-url", server.base_url, "--model", "demo", *QUICK, "--out", str(tmp_path))
    assert code == 1 and results["records"] == []
    assert "needs a launched server" in results["runs"][0]["failure"]


def test_compare_alternates_mlx_lm_server_and_rapid_mlx_on_a_made_model(tmp_path):
    import tomli_w

    model = tmp_path / "model"
    assert bench_main(["make-model", "--size", "tiny", "--out", str(model)]) == 0
    config = tmp_path / "rapid.toml"
    config.write_text(tomli_w.dumps({"server": {"runtime_dir": str(tmp_path / "run-rapid"), "offline": True},
                                     "models": {"bench": {"path": str(model), "aliases": ["default_model"]}}}))
    mlx_lm = f"env HF_HUB_CACHE={tmp_path / 'hf'} {shlex.quote(sys.executable)} -m mlx_lm server --model {model} --port {{port}}"
    rapid = f"{shlex.quote(sys.executable)} -m router.cli serve --config {config} --port {{port}}"
    code, results = bench("agent", "--compare", mlx_lm, rapid, "--labels", "mlx_lm.server,rapid-mlx", "--model", "default_model",
                          "--sessions", "1", "--turns", "2", "--tool-time", "0", "--tokenizer", str(model), *QUICK,
                          "--out", str(tmp_path / "run"))
    assert code == 0
    check_figures(results)
    assert [(run["target"], run["round"]) for run in results["runs"]] == [
        ("mlx_lm.server", 1), ("rapid-mlx", 1), ("mlx_lm.server", 2), ("rapid-mlx", 2)]
    # Both sides got the same prompts: same content seed per round, one tokenizer.
    prompts = {(r["target"], r["round"], r["turn"]): r["prompt_tokens"] for r in results["records"]}
    assert all(prompts[("mlx_lm.server", rnd, turn)] == prompts[("rapid-mlx", rnd, turn)] for rnd in (1, 2) for turn in (1, 2))
    ratios = results["ratios"]["sessions=1"]["ttft_later_p50_s"]
    assert len(ratios["ratio"]) == 2 and ratios["median_ratio"] == pytest.approx(statistics.median(ratios["ratio"]))
    for run, (a, b) in enumerate(zip(ratios["mlx_lm.server"], ratios["rapid-mlx"])):
        assert ratios["ratio"][run] == pytest.approx(b / a)
    # mlx_lm.server reports the prefix it reused in usage; the bench reads it from there.
    mlx_lm_turn2 = [r for r in results["records"] if r["target"] == "mlx_lm.server" and r["turn"] == 2]
    assert all(r["cached_tokens"] > 0 for r in mlx_lm_turn2)
    assert len(list((tmp_path / "run" / "logs").glob("*.log"))) == 4
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "| figure | mlx_lm.server (per round) | rapid-mlx (per round) | rapid-mlx / mlx_lm.server (per round) |" in summary


def test_a_server_killed_mid_run_is_reported_as_errors_with_a_nonzero_exit(servers, tmp_path):
    doomed = servers.start({"demo": DEMO})
    out = tmp_path / "run"
    bench_process = subprocess.Popen(
        [sys.executable, "-m", "router.cli", "bench", "agent", "--base-url", doomed.base_url, "--model", "demo", "--sessions", "1",
         "--turns", "6", "--tool-time", "0.5", *QUICK, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The first chat request is the bench's warm-up probe: killed while that answer is still on
    # its way, the bench waits for the server to come back (--ready-timeout, 600 s), as it should
    # for a server still starting. The second is the workload's first turn.
    deadline = time.monotonic() + 60
    while doomed.log().count("POST /v1/chat/completions") < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    doomed.process.send_signal(signal.SIGKILL)
    stdout, stderr = bench_process.communicate(timeout=120)
    assert bench_process.returncode == 1, stdout + stderr
    results = json.loads((out / "results.json").read_text())
    check_figures(results)
    records = results["records"]
    assert len(records) == 6 and not _ok(records[-1])
    assert records[-1]["status"] == 0 and results["runs"][0]["figures"]["errors"] >= 1
    assert "failed requests" in stderr and "no response" in (out / "summary.md").read_text()


def test_parsers_workload_runs_in_process(tmp_path):
    assert bench_main(["parsers", "--size", "tiny", "--repeats", "1", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "baseline: one batch-1 decode step" in summary and "| hermes |" in summary and "| pythonic |" in summary


def test_kv_memory_measures_bytes_per_token_at_each_setting(tiny_models, tmp_path, capsys):
    model = tiny_models.path("qwen3")
    config = json.loads((model / "config.json").read_text())
    layers, heads = config["num_hidden_layers"], config["num_key_value_heads"]
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    assert bench_main(["kv-memory", "--model-dir", str(model), "--group-size", "32", "--tokens", "300", "--dtype", "float32",
                       "--budget-gb", "1", "--context", "1000", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    # Keys and values per layer and head: fp32 is 4 bytes an element; b-bit is b/8 bytes an
    # element plus a float32 scale and bias per group of 32.
    full = layers * heads * 2 * dim * 4
    for setting, per_token in (("unquantized (float32)", full), ("8-bit", layers * heads * 2 * (dim + 8 * dim // 32)),
                               ("4-bit", layers * heads * 2 * (dim // 2 + 8 * dim // 32))):
        assert f"| {setting} | {per_token:,} | {per_token / full:.3f} | 0 B | {2**30 // per_token:,} tokens |" in summary
    assert bench_main(["kv-memory", "--model-dir", str(model), "--group-size", "64", "--out", str(tmp_path)]) == 2
    assert "kv_cache.group_size = 64 does not divide the model's attention head dimension 32" in capsys.readouterr().err


def test_step_compares_the_scheduler_with_the_bare_generator_in_process(tmp_path):
    assert bench_main(["step", "--size", "tiny", "--sequences", "2,4", "--steps", "6", "--rounds", "2", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith("| 2 |") or line.startswith("| 4 |")]
    assert len(rows) == 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        generator, scheduler, ratios = ([float(v) for v in cells[i].split()] for i in (1, 2, 3))
        assert len(generator) == len(scheduler) == 2 and all(v > 0 for v in generator + scheduler)
        # (the table rounds the times to 0.01 ms and the ratios to 0.001)
        assert ratios == pytest.approx([s / g for s, g in zip(scheduler, generator)], rel=0.05, abs=0.01)


def test_disk_tier_measures_flush_index_and_load(tiny_models, tmp_path):
    assert bench_main(["disk-tier", "--model-dir", str(tiny_models.path("qwen3")), "--entries", "3", "--tokens", "64",
                       "--dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "3 entries of 64 tokens" in summary and "s per GiB |" in summary and "ms for 3 entries" in summary
    assert not list(tmp_path.glob("tmp*"))  # its files are gone


def test_burst_reports_inter_token_gaps_from_the_stream(server, tmp_path):
    code, results = bench("burst", "--base-url", server.base_url, "--model", "demo", "--n", "3", "--max-tokens", "12",
                          "--ignore-eos", "--tokenizer", str(build.ARTIFACT_DIR), "--prompt-tokens", "40", "--out", str(tmp_path))
    assert code == 0
    records = results["records"]
    # One gap between consecutive output events; a stream of 12 tokens has at most 11 of them
    # (fewer when a parser holds text back, as for a tool call the demo model leaves unfinished).
    assert all(len(r["gaps_s"]) <= r["completion_tokens"] - 1 and min(r["gaps_s"], default=0) >= 0 for r in records)
    assert any(r["gaps_s"] for r in records)
    gaps = sorted(gap for r in records for gap in r["gaps_s"])
    figures = results["runs"][0]["figures"]
    assert figures["itl_p50_s"] == pytest.approx(statistics.median(gaps))
    assert gaps[0] <= figures["itl_p95_s"] <= gaps[-1] and figures["itl_p50_s"] <= figures["itl_p95_s"]


def test_engine_burst_compares_the_scheduler_at_each_prefill_share_with_the_bare_generator(tmp_path):
    assert bench_main(["engine-burst", "--size", "tiny", "--n", "2,3", "--prompt-tokens", "16", "--long-every", "2",
                       "--long-tokens", "40", "--max-tokens", "4", "--prefill-share", "0.5,1", "--rounds", "2",
                       "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "every 2th 40 tokens long" in summary and summary.count("### ") == 2
    for share in ("0.5", "1"):
        rows = [line for line in summary.splitlines() if line.startswith(f"| {share} |")]
        assert len(rows) == 2
        for row in rows:
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            rates = [float(v) for v in cells[1].split()]
            ratios = [float(v) for v in cells[2].split("→")[0].split()]
            assert len(rates) == len(ratios) == 2 and all(v > 0 for v in rates + ratios)


def test_step_profile_says_where_the_workers_step_spends_its_time(tmp_path):
    assert bench_main(["step", "--profile", "--size", "tiny", "--sequences", "2", "--steps", "6", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith("| ") and line.endswith("% |")]
    shares = {row.split("|")[1].strip(): float(row.split("|")[3].strip().rstrip("%")) for row in rows}
    assert any(label.startswith("device work") for label in shares) and any(label.startswith("scheduler") for label in shares)
    assert sum(shares.values()) == pytest.approx(100, abs=len(shares))  # each share rounded to 1%


def _connected_within(port: int, clients: int, seconds: float) -> int:
    """How many of ``clients`` simultaneous TCP connections to a server complete in ``seconds``."""
    import select
    import socket

    sockets = [socket.socket() for _ in range(clients)]
    try:
        for sock in sockets:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
        time.sleep(seconds)
        _, writable, _ = select.select([], sockets, [], 0)
        return sum(1 for sock in writable if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize(("module", "expected"), [("router.bench.mlx_lm_server", 40), ("mlx_lm.server", 6)])
def test_the_bench_runs_mlx_lm_server_with_a_listen_backlog_that_holds_a_burst(tiny_models, tmp_path, module, expected):
    import os
    import socket

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", module, "--model", str(tiny_models.path("qwen3")), "--port", str(port)],
                               env={**os.environ, "HF_HUB_CACHE": str(tmp_path / "hf")}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        # Stopped, the server accepts nothing: only its listen backlog holds connections
        # (Linux completes one more than the backlog; stock mlx_lm.server listens with 5).
        process.send_signal(signal.SIGSTOP)
        try:
            assert _connected_within(port, 40, 1.0) == expected
        finally:
            process.send_signal(signal.SIGCONT)
    finally:
        process.terminate()
        process.wait(timeout=30)
