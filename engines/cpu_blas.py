"""Which BLAS a worker's MLX multiplies with, when MLX runs on its CPU backend (Linux).

MLX's Linux CPU wheel links netlib's reference BLAS: fp32 matmuls run ~45x slower than with
OpenBLAS, which exports the same ``cblas_*`` symbols (reference/mlx-lm.md §6). Preloading a
system OpenBLAS into each worker (``LD_PRELOAD``) swaps it in without rebuilding anything; a
20k-token agent prompt goes from about a minute of prefill to seconds. On macOS MLX uses Metal
and Accelerate, and nothing here applies.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import logging
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# Library names that mark a preload as a BLAS the user chose (OpenBLAS, BLIS, MKL).
BLAS_NAMES = ("blas", "blis", "mkl")

__all__ = [
    "BlasChoice",
    "best_openblas_kernels",
    "choose_cpu_blas",
    "cpu_flags",
    "known_openblas_paths",
    "log_choice",
    "mlx_runs_on_cpu",
    "on_x86_64",
    "openblas_corename",
    "openblas_kernels",
]

# OpenBLAS's x86-64 kernel sets (``OPENBLAS_CORETYPE`` names), oldest first. A DYNAMIC_ARCH
# build (Debian's, Fedora's) picks one from the CPU's model number; on a VM that hides it
# ("Intel(R) Xeon(R) Processor") it falls back to Prescott's SSE3 kernels although the CPU has
# AVX2 or AVX-512, and fp32 matmuls run at a third to a sixth of the speed (docs/benchmarks.md,
# "OpenBLAS's kernels on a VM that hides its CPU model"). Sets off this line (Zen,
# Bulldozer...) are OpenBLAS's informed pick for a CPU it knows, and are left alone.
KERNEL_LADDER = ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge", "Haswell", "SkylakeX",
                 "Cooperlake", "SapphireRapids")
# The best set the CPU's flags allow, best first (as ``/proc/cpuinfo`` names the flags).
# OpenBLAS itself falls back to an older set when the OS does not enable what one needs.
KERNELS_BY_FLAGS = (
    ("SkylakeX", frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})),
    ("Haswell", frozenset({"avx2", "fma"})),
)


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


def on_x86_64() -> bool:
    """Whether this is an x86-64 machine, the one OpenBLAS's kernel names here describe."""
    return platform.machine().lower() in ("x86_64", "amd64")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux reports them (``avx2``, ``fma``...); empty elsewhere."""
    try:
        with open("/proc/cpuinfo") as info:
            line = next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return frozenset()
    return frozenset(line.partition(":")[2].split())


def best_openblas_kernels(flags: frozenset[str]) -> str | None:
    """The newest kernel set of ``KERNELS_BY_FLAGS`` these flags run, or None (older CPUs)."""
    return next((kernels for kernels, needs in KERNELS_BY_FLAGS if needs <= flags), None)


def openblas_corename(library: str | None = None) -> str | None:
    """The kernel set an OpenBLAS picked for this CPU (``Haswell``, ``SkylakeX``...): the one
    at ``library``, loaded to ask it, or with None the one already in this process; None when
    it is not an OpenBLAS."""
    corename = getattr(ctypes.CDLL(library), "openblas_get_corename", None)
    if corename is None:
        return None
    corename.restype = ctypes.c_char_p
    name = corename()
    return name.decode() if name else None


@functools.cache
def openblas_kernels(library: str) -> str | None:
    """The kernel set ``library`` picks on this machine when nothing names one, or None when it
    is not an OpenBLAS (or will not load). Asked once per process and library.

    Asked in a child (``python -m engines.cpu_blas``, as workers start), so the router never
    loads a second BLAS into its own process."""
    environ = {key: value for key, value in os.environ.items() if key not in ("OPENBLAS_CORETYPE", "LD_PRELOAD")}
    # About 0.1 s; a reload that changes cpu_blas waits for it, so a hung child is cut short.
    try:
        probe = subprocess.run([sys.executable, "-m", "engines.cpu_blas", library], capture_output=True, text=True,
                               timeout=10, env=environ, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.debug("cpu_blas: could not ask %s for its kernels: %s", library, exc)
        return None
    return (probe.stdout.strip() or None) if probe.returncode == 0 else None


@dataclass(frozen=True)
class BlasChoice:
    """What workers get: a library to preload (or none), the OpenBLAS kernel set to force (or
    none: its own pick), and the reason, for the log."""

    library: str | None
    reason: str
    slow: bool = False  # MLX stays on its reference BLAS although it runs on the CPU
    kernels: str | None = None

    def worker_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables to set in a worker's environment on top of ``environ``."""
        env: dict[str, str] = {}
        preloaded = environ.get("LD_PRELOAD", "")
        if self.library is not None and self.library not in preloaded.split():
            env["LD_PRELOAD"] = f"{self.library} {preloaded}".strip()
        if self.kernels is not None and not environ.get("OPENBLAS_CORETYPE"):
            env["OPENBLAS_CORETYPE"] = self.kernels
        return env


def _with_better_kernels(choice: BlasChoice, library: str, environ: Mapping[str, str],
                         flags: Callable[[], frozenset[str]], probe: Callable[[str], str | None]) -> BlasChoice:
    """``choice`` forcing the kernel set this CPU's flags allow where ``library`` (an x86-64
    OpenBLAS) would pick an older one on its own; ``choice`` as it is otherwise."""
    if environ.get("OPENBLAS_CORETYPE"):  # the user's pick stands
        return dataclasses.replace(choice, reason=f"{choice.reason}, with the kernels the environment names "
                                                  f"(OPENBLAS_CORETYPE={environ['OPENBLAS_CORETYPE']})")
    if not on_x86_64():
        return choice  # other kernels than this ladder's
    best = best_openblas_kernels(flags())
    if best is None:
        return choice
    picked = probe(library)
    if picked not in KERNEL_LADDER or KERNEL_LADDER.index(picked) >= KERNEL_LADDER.index(best):
        return choice
    reason = (f"{choice.reason}, with its {best} kernels (OPENBLAS_CORETYPE={best}: it picks {picked}'s on its own, "
              f"which this CPU's flags outrun)")
    return dataclasses.replace(choice, kernels=best, reason=reason)


def choose_cpu_blas(
    setting: str,
    *,
    environ: Mapping[str, str] = os.environ,
    system: str = sys.platform,
    candidates: Sequence[str] | None = None,
    cpu_backend: Callable[[], bool] = mlx_runs_on_cpu,
    flags: Callable[[], frozenset[str]] = cpu_flags,
    probe_kernels: Callable[[str], str | None] = openblas_kernels,
) -> BlasChoice:
    """Resolve ``[server] cpu_blas`` ("auto", "off" or a library path) for this machine."""
    if setting == "off":
        return BlasChoice(None, "cpu_blas = \"off\": workers keep MLX's bundled BLAS")
    if not system.startswith("linux"):
        return BlasChoice(None, f"not Linux ({system}): MLX uses the platform's own BLAS")

    def kernels_for(choice: BlasChoice, library: str) -> BlasChoice:
        return _with_better_kernels(choice, library, environ, flags, probe_kernels)

    if setting != "auto":
        return kernels_for(BlasChoice(setting, f"workers preload {setting} (cpu_blas)"), setting)
    if not cpu_backend():
        return BlasChoice(None, "MLX runs on a GPU here: no BLAS preload")
    already = [lib for lib in environ.get("LD_PRELOAD", "").split()
               if any(name in os.path.basename(lib).lower() for name in BLAS_NAMES)]
    if already:
        return kernels_for(BlasChoice(None, f"LD_PRELOAD already has {already[0]}: workers inherit it"), already[0])
    for path in known_openblas_paths() if candidates is None else candidates:
        if os.path.isfile(path):
            return kernels_for(BlasChoice(path, f"MLX runs on its CPU backend: workers preload {path}"), path)
    return BlasChoice(None, "MLX runs on its CPU backend with its bundled reference BLAS, and no system OpenBLAS "
                            "was found; installing one (Debian: apt-get install libopenblas0-pthread) makes fp32 "
                            "models ~45x faster", slow=True)


def log_choice(choice: BlasChoice) -> None:
    """One line at start (and when a reload changes it): a warning when the slow BLAS stays."""
    logger.log(logging.WARNING if choice.slow else logging.INFO, "cpu_blas: %s", choice.reason)


if __name__ == "__main__":  # openblas_kernels' child: python -m engines.cpu_blas LIBRARY
    print(openblas_corename(sys.argv[1]) or "")
