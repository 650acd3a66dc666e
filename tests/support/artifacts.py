"""Files tests leave for a person to look at; tests/conftest.py prints their paths after the run."""

from __future__ import annotations

from pathlib import Path

written: list[Path] = []


def record(path: Path) -> Path:
    written.append(path)
    return path
