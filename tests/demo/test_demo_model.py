"""The shipped demo model: it rebuilds identically, and it chats, calls tools and thinks.

Behaviour is measured on ``engines.demo.evaluate``'s fixed evaluation set with greedy
decoding through mlx-lm.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caches.quantized import KVQuantization
from engines import cpu_blas
from engines.demo import build, evaluate

ARTIFACT = build.ARTIFACT_DIR
QUANTIZED = build.QUANTIZED_DIR
SHIPPED_FILES = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}


def _digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def report() -> dict:
    """The evaluation of the shipped fp32 artifact (about 20 s on two CPU cores)."""
    return evaluate.evaluate(ARTIFACT)


def test_artifact_files_are_shipped_and_small():
    for directory in (ARTIFACT, QUANTIZED):
        names = {p.name for p in directory.iterdir()}
        assert SHIPPED_FILES <= names, directory
        assert sum(p.stat().st_size for p in directory.iterdir()) < 8 * 2**20
    config = json.loads((ARTIFACT / "config.json").read_text())
    tokenizer_config = json.loads((ARTIFACT / "tokenizer_config.json").read_text())
    tokenizer = json.loads((ARTIFACT / "tokenizer.json").read_text())
    im_end = next(t["id"] for t in tokenizer["added_tokens"] if t["content"] == "<|im_end|>")
    assert config["eos_token_id"] == im_end
    assert config["model_type"] == "qwen3"
    assert tokenizer_config["tool_parser_type"] == "json_tools"
    assert json.loads((QUANTIZED / "config.json").read_text())["quantization"]["bits"] == 4


@pytest.mark.slow
def test_build_command_is_bit_exact(tmp_path):
    """``rapid-mlx demo build`` twice with the same seed (fewer steps, all four stages)
    writes byte-identical files."""
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        result = subprocess.run(
            [sys.executable, "-m", "router.cli", "demo", "build", "--out", str(out), "--quantized-out", str(out / "q4"),
             "--steps", "8", "--restart-steps", "4", "--copy-steps", "4", "--polish-steps", "4", "--no-eval"],
            capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        recipe = json.loads(result.stdout)["recipe"]
        assert (recipe["steps"], recipe["restart_steps"], recipe["copy_steps"], recipe["polish_steps"]) == (8, 4, 4, 4)
    assert _digests(first) == _digests(second)
    assert _digests(first / "q4") == _digests(second / "q4")
    assert SHIPPED_FILES <= set(_digests(first))


@pytest.mark.slow
def test_the_build_preloads_a_system_openblas_when_started_without_one(tmp_path):
    """A newcomer's ``rapid-mlx demo build`` (nothing preloaded) starts itself again on the system
    OpenBLAS, as the router does for its workers; ``--cpu-blas off`` keeps MLX's bundled BLAS."""
    from engines.cpu_blas import known_openblas_paths

    if not sys.platform.startswith("linux") or not any(Path(p).is_file() for p in known_openblas_paths()):
        pytest.skip("needs Linux with a system OpenBLAS (.ci/run installs Debian's)")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", build.REEXEC_MARK)}

    def build_once(*extra: str) -> tuple[str | None, str]:
        result = subprocess.run(
            [sys.executable, "-m", "router.cli", "demo", "build", "--out", str(tmp_path / "out"), "--no-quantized",
             "--no-eval", "--steps", "1", "--restart-steps", "0", "--copy-steps", "0", "--polish-steps", "0", *extra],
            capture_output=True, text=True, timeout=600, env=env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["blas_kernels"], result.stderr

    kernels, log = build_once()
    assert kernels == (build.kernels_to_pin() or kernels) and kernels, log
    assert "the build starts again with" in log and "pinned to one thread" in log
    kernels, log = build_once("--cpu-blas", "off")
    assert kernels is None
    assert "starts again" not in log


def test_the_build_pins_the_kernels_of_the_shipped_weights_where_the_cpu_runs_them(monkeypatch):
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.setattr(cpu_blas, "on_x86_64", lambda: True)
    assert build.kernels_to_pin(frozenset({"sse2", "avx", "avx2", "fma", "avx512f"})) == build.BUILD_KERNELS == "Haswell"
    assert build.kernels_to_pin(frozenset({"sse2", "sse4_2", "avx"})) is None  # older than Haswell: OpenBLAS's own pick
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")  # a set the user chose is kept
    assert build.kernels_to_pin(frozenset({"avx2", "fma"})) is None
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    monkeypatch.setattr(cpu_blas, "on_x86_64", lambda: False)  # other kernels altogether
    assert build.kernels_to_pin(frozenset({"avx2", "fma"})) is None


def test_the_build_names_the_blas_kernels_it_ran_on():
    """A rebuild compares byte for byte only on the same OpenBLAS kernels, so the build says which."""
    import ctypes

    kernels = build.blas_kernels()
    if getattr(ctypes.CDLL(None), "openblas_get_corename", None) is None:
        assert kernels is None
    else:  # .ci/run preloads Debian's OpenBLAS: a DYNAMIC_ARCH build names the set it picked
        config = ctypes.CDLL(None).openblas_get_config
        config.restype = ctypes.c_char_p
        assert kernels and kernels.isalnum()
        assert kernels in config().decode().split()


# Thresholds sit a little below what the shipped artifact measured (engines/demo/README.md),
# leaving room for floating-point differences between platforms, not for regressions.

def test_tool_calls_are_well_formed(report):
    assert report["tool_call_rate"] >= 0.85  # measured 0.90, held-out values and thinking included
    seen = [report["groups"][f"call_{kind}/seen"]["well_formed"] for kind in ("weather", "search", "file")]
    assert sum(seen) / len(seen) >= 0.95  # measured 1.0 (weather, search and file 1.0): seen values, thinking off
    assert report["groups"]["call_weather/seen"]["well_formed"] >= 0.95  # measured 1.0


def test_arguments_are_copied_for_seen_values(report):
    assert report["groups"]["call_weather/seen"]["right_arguments"] >= 0.95  # measured 1.0
    assert report["argument_accuracy_seen"] >= 0.9  # measured 0.96 (search and file values are harder)


def test_held_out_values_are_copied_often(report):
    # Values that occur nowhere in training nor in the tokenizer's corpus (lexicon.HELDOUT_*).
    assert report["argument_accuracy_heldout"] >= 0.5  # measured 0.54


def test_weather_requests_for_held_out_cities_get_the_city_copied(report):
    # Issue 21's target, met with none to spare: 16 of the 20 held-out cities (the validation
    # cities of engines/demo/README.md, 0.762, say a new set may well fall below it).
    assert report["groups"]["call_weather/heldout"]["right_arguments"] >= 0.8


def test_the_copy_report_tells_recall_from_copying():
    # Measured on the shipped model: training cities 1.0, fresh invented names 1.0, held-out
    # cities 0.75 (before the copying stage: 0.95, 0.15 and 0.0, engines/demo/README.md).
    copied = evaluate.copy_report(ARTIFACT)
    assert copied["train"] >= 0.9
    assert copied["invented"] >= 0.85
    assert copied["heldout"] >= 0.6


def test_plain_chat_gets_text_replies(report):
    assert report["groups"]["chat/chat"]["text_reply"] >= 0.9  # measured 1.0
    assert report["groups"]["chat_with_tools/chat"]["text_reply"] >= 0.9  # measured 1.0
    assert report["text_reply_rate"] >= 0.9  # measured 1.0


def test_answers_after_a_tool_result_state_what_it_returned(report):
    answers = report["groups"]["answer_after_result/seen"]
    assert answers["text_reply"] >= 0.85  # measured 1.0
    assert answers["states_city"] >= 0.85  # measured 0.93
    assert answers["states_temperature"] >= 0.7  # measured 0.8
    assert answers["states_condition"] >= 0.85  # measured 1.0 (a guess among nine would be 0.11)
    assert answers["uses_result"] >= 0.7  # measured 0.8: all three in one answer
    held_out = report["groups"]["answer_after_result/heldout"]
    assert held_out["states_city"] >= 0.6  # measured 0.73: a city it has never seen, read from the result


def test_thinking_mode_opens_with_a_think_block(report):
    assert report["think_rate"] >= 0.9  # measured 0.97
    thinking_calls = [report["groups"][f"think_call_weather/{split}"]["well_formed"] for split in ("seen", "heldout")]
    assert min(thinking_calls) >= 0.8  # measured 1.0 and 0.9
    assert report["groups"]["think_chat/chat"]["think"] >= 0.9  # measured 1.0


def test_quantized_artifact_loads_and_calls_tools():
    cases = [c for c in evaluate.eval_cases() if c["kind"] == "call_weather" and c["split"] == "seen"]
    outputs = evaluate.generate(QUANTIZED, cases)
    scores = [evaluate.score(c, text, stopped) for c, (text, stopped) in zip(cases, outputs)]
    assert sum(s["well_formed"] for s in scores) / len(scores) >= 0.9  # measured 0.95
    assert sum(s["right_arguments"] for s in scores) / len(scores) >= 0.9  # measured 0.95


def test_config_allows_agent_sized_prompts():
    config = json.loads((ARTIFACT / "config.json").read_text())
    assert config["max_position_embeddings"] >= 65536  # Claude Code's first request: ~50k demo tokens
    assert config["rope_theta"] >= 1e6


HEADLINE_RATES = ("tool_call_rate", "argument_accuracy_seen", "text_reply_rate", "think_rate", "answer_uses_result_seen")


@pytest.mark.slow
def test_an_8_bit_kv_cache_keeps_the_evaluation_within_a_margin_of_full_precision(report):
    # Measured (fp → 8-bit, group 64, quantized from the first token): every headline rate the
    # same (tool calls 0.90, seen arguments 0.96, text replies 1.0, thinking 0.97, answers using
    # the result 0.8); held-out arguments, not among them, 0.54 → 0.52.
    quantized = evaluate.evaluate(ARTIFACT, kv_quantization=KVQuantization(bits=8, group_size=64))
    for rate in HEADLINE_RATES:
        assert abs(quantized[rate] - report[rate]) <= 0.05, (rate, report[rate], quantized[rate])
