"""The rapid-mlx command line: validate and models."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "router.cli", *args], capture_output=True, text=True, timeout=120)


def test_validate_names_every_bad_toml_path(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[server]\nport = "x"\n[models.coder]\npath = "/m"\nkv_bits = 4\n[models.coder.kv_cache]\nbits = 3\n')
    result = run_cli("validate", str(bad))
    assert result.returncode == 1
    assert "server.port:" in result.stderr
    assert "models.coder.kv_bits: unknown key" in result.stderr
    assert "models.coder.kv_cache.bits: must be 0, 4 or 8 (got 3)" in result.stderr


def test_validate_accepts_the_example_file():
    result = run_cli("validate", "rapidmlx.toml.example")
    assert result.returncode == 0, result.stderr


def test_serve_refuses_an_invalid_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[models.a]\n")
    result = run_cli("serve", "--config", str(bad))
    assert result.returncode == 1 and "models.a.path: required" in result.stderr


def test_models_lists_the_config():
    result = run_cli("models", "--config", "rapidmlx.toml.example")
    assert result.returncode == 0
    assert result.stdout.startswith("coder\n") and "aliases: claude-*, gpt-*" in result.stdout
    assert "tool parser: auto (decided at load" in result.stdout  # the example's repo is not in any cache here


def test_models_shows_detected_parsers_and_why(tmp_path, tiny_models):
    config = tmp_path / "c.toml"
    config.write_text(f'[models.a]\npath = "{tiny_models.path("qwen3")}"\n'
                      f'[models.b]\npath = "{tiny_models.path("qwen3")}"\ntool_parser = "qwen3_coder"\nreasoning_parser = "none"\n')
    out = run_cli("models", "--config", str(config)).stdout
    a, b = out.split("\nb\n")
    assert "tool parser: hermes (chat template contains '<tool_call>'" in a
    assert "reasoning parser: qwen3 (" in a
    assert "tool parser: qwen3_coder (pinned in config)" in b
    assert 'reasoning parser: none (disabled in config (reasoning_parser = "none"))' in b


def test_models_without_config_is_the_bundled_demo():
    result = run_cli("models")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("demo\n") and "/engines/demo/artifact\n" in result.stdout
    # The demo's tokenizer_config names its format the way mlx-lm does ("json_tools").
    assert "tool parser: hermes (tokenizer_config tool_parser_type=json_tools)" in result.stdout
