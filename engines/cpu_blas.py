"""Which BLAS a worker's MLX multiplies with, when MLX runs on its CPU backend (Linux).

MLX's Linux CPU wheel links netlib's reference BLAS: fp32 matmuls run ~45x slower than with
OpenBLAS, which exports the same ``cblas_*`` symbols (reference/mlx-lm.md §6). Preloading a
system OpenBLAS into each worker (``LD_PRELOAD``) swaps it in without rebuilding anything; a
20k-token agent prompt goes from about a minute of prefill to seconds. On macOS MLX uses Metal
and Accelerate, and nothing here applies.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# Library names that mark a preload as a BLAS the user chose (OpenBLAS, BLIS, MKL).
BLAS_NAMES = ("blas", "blis", "mkl")

__all__ = ["BlasChoice", "choose_cpu_blas", "known_openblas_paths", "log_choice", "mlx_runs_on_cpu"]


def known_openblas_paths() -> tuple[str, ...]:
    """Where distributions install a threaded OpenBLAS that exports cblas (most common first)."""
    triplet = f"{platform.machine()}-linux-gnu"
    return (
        f"/usr/lib/{triplet}/openblas-pthread/libblas.so.3",  # Debian, Ubuntu: libopenblas0-pthread
        f"/usr/lib/{triplet}/libopenblas.so.0",
        "/usr/lib64/libopenblasp.so.0",  # Fedora, RHEL: openblas-threads
        "/usr/lib64/libopenblas.so.0",
        "/usr/lib/libopenblas.so.0",  # Arch
    )


def mlx_runs_on_cpu() -> bool:
    """Whether MLX's default device here is the CPU (no Metal, no CUDA)."""
    import mlx.core as mx  # imported late: the router needs it only for this question

    return mx.default_device().type == mx.DeviceType.cpu


@dataclass(frozen=True)
class BlasChoice:
    """What workers get: a library to preload (or none) and the reason, for the log."""

    library: str | None
    reason: str
    slow: bool = False  # MLX stays on its reference BLAS although it runs on the CPU

    def worker_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables to set in a worker's environment on top of ``environ``."""
        if self.library is None:
            return {}
        preloaded = environ.get("LD_PRELOAD", "")
        if self.library in preloaded.split():
            return {}
        return {"LD_PRELOAD": f"{self.library} {preloaded}".strip()}


def choose_cpu_blas(
    setting: str,
    *,
    environ: Mapping[str, str] = os.environ,
    system: str = sys.platform,
    candidates: Sequence[str] | None = None,
    cpu_backend: Callable[[], bool] = mlx_runs_on_cpu,
) -> BlasChoice:
    """Resolve ``[server] cpu_blas`` ("auto", "off" or a library path) for this machine."""
    if setting == "off":
        return BlasChoice(None, "cpu_blas = \"off\": workers keep MLX's bundled BLAS")
    if not system.startswith("linux"):
        return BlasChoice(None, f"not Linux ({system}): MLX uses the platform's own BLAS")
    if setting != "auto":
        return BlasChoice(setting, f"workers preload {setting} (cpu_blas)")
    if not cpu_backend():
        return BlasChoice(None, "MLX runs on a GPU here: no BLAS preload")
    already = [lib for lib in environ.get("LD_PRELOAD", "").split()
               if any(name in os.path.basename(lib).lower() for name in BLAS_NAMES)]
    if already:
        return BlasChoice(None, f"LD_PRELOAD already has {already[0]}: workers inherit it")
    for path in known_openblas_paths() if candidates is None else candidates:
        if os.path.isfile(path):
            return BlasChoice(path, f"MLX runs on its CPU backend: workers preload {path}")
    return BlasChoice(None, "MLX runs on its CPU backend with its bundled reference BLAS, and no system OpenBLAS "
                            "was found; installing one (Debian: apt-get install libopenblas0-pthread) makes fp32 "
                            "models ~45x faster", slow=True)


def log_choice(choice: BlasChoice) -> None:
    """One line at start (and when a reload changes it): a warning when the slow BLAS stays."""
    logger.log(logging.WARNING if choice.slow else logging.INFO, "cpu_blas: %s", choice.reason)
