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
    assert result.stdout.startswith("coder\t") and "aliases=claude-*, gpt-*" in result.stdout
