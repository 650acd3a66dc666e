"""Tiny checkpoints of real architectures, built on first use and shared by the session."""

from __future__ import annotations

from pathlib import Path

from engines.demo.tiny import build_tiny_model


class TinyModels:
    def __init__(self, root: Path) -> None:
        self._root = root

    def path(self, arch: str = "qwen3", **options) -> Path:
        """The checkpoint directory for ``arch`` (built the first time it is asked for)."""
        name = arch + "".join(f"-{k}{v}" for k, v in sorted(options.items()))
        out = self._root / name
        if not (out / "config.json").is_file():
            build_tiny_model(out, arch=arch, **options)
        return out
