"""Shared fixtures: tiny real checkpoints built once per session, and live servers on loopback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import artifacts
from tests.support.models import TinyModels
from tests.support.server import ServerFactory


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """Random-weight qwen3, llama and hybrid qwen3_next checkpoints (built lazily, once)."""
    return TinyModels(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory):
    """Start ``rapid-mlx serve`` processes; every one is stopped at the end of the session."""
    factory = ServerFactory(tmp_path_factory.mktemp("servers"))
    yield factory
    factory.stop_all()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Where tests leave files for a person to look at (screenshots); their paths end the run's summary."""
    root = Path(os.environ.get("RAPIDMLX_TEST_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def pytest_terminal_summary(terminalreporter) -> None:
    for path in artifacts.written:
        terminalreporter.write_line(f"test artifact: {path}")
