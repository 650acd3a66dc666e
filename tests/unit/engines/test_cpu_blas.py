"""Which BLAS workers preload: ``[server] cpu_blas`` resolved against this machine's facts."""

from __future__ import annotations

import sys

import pytest

from engines import cpu_blas
from engines.cpu_blas import BlasChoice, best_openblas_kernels, choose_cpu_blas, known_openblas_paths

ON_CPU = lambda: True  # noqa: E731
ON_GPU = lambda: False  # noqa: E731


@pytest.fixture
def openblas(tmp_path):
    library = tmp_path / "libblas.so.3"
    library.write_bytes(b"\x7fELF")
    return str(library)


def test_auto_preloads_the_first_openblas_found(tmp_path, openblas):
    choice = choose_cpu_blas("auto", environ={}, system="linux", candidates=[str(tmp_path / "absent.so"), openblas],
                             cpu_backend=ON_CPU)
    assert choice.library == openblas and not choice.slow
    assert choice.worker_env({}) == {"LD_PRELOAD": openblas}
    assert openblas in choice.reason


def test_auto_keeps_what_the_user_preloaded(openblas):
    mine = "/opt/blis/libblis.so /usr/lib/libjemalloc.so"
    choice = choose_cpu_blas("auto", environ={"LD_PRELOAD": mine}, system="linux", candidates=[openblas], cpu_backend=ON_CPU)
    assert choice.library is None and "libblis.so" in choice.reason


def test_a_preload_is_added_in_front_of_other_preloads(openblas):
    choice = BlasChoice(openblas, "")
    assert choice.worker_env({"LD_PRELOAD": "/usr/lib/libjemalloc.so"}) == {"LD_PRELOAD": f"{openblas} /usr/lib/libjemalloc.so"}
    assert choice.worker_env({"LD_PRELOAD": f"/x.so {openblas}"}) == {}  # already there


def test_auto_without_an_openblas_warns_that_it_stays_slow(tmp_path):
    choice = choose_cpu_blas("auto", environ={}, system="linux", candidates=[str(tmp_path / "absent.so")], cpu_backend=ON_CPU)
    assert choice.library is None and choice.slow and "libopenblas0-pthread" in choice.reason


@pytest.mark.parametrize(("system", "cpu_backend"), [("darwin", ON_CPU), ("linux", ON_GPU)])
def test_auto_does_nothing_off_linux_or_on_a_gpu(openblas, system, cpu_backend):
    choice = choose_cpu_blas("auto", environ={}, system=system, candidates=[openblas], cpu_backend=cpu_backend)
    assert choice.library is None and not choice.slow and choice.worker_env({}) == {}


def test_off_and_an_explicit_path(openblas):
    assert choose_cpu_blas("off", environ={}, system="linux", candidates=[openblas], cpu_backend=ON_CPU).library is None
    explicit = choose_cpu_blas(openblas, environ={}, system="linux", candidates=[], cpu_backend=ON_GPU)
    assert explicit.library == openblas  # an explicit path is the operator's call, GPU or not


AVX2 = frozenset({"sse3", "avx", "avx2", "fma"})
AVX512 = AVX2 | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


@pytest.fixture
def x86(monkeypatch):
    monkeypatch.setattr(cpu_blas, "on_x86_64", lambda: True)


def _auto(openblas, flags, picked, environ=None):
    asked = []

    def probe(library):
        asked.append(library)
        return picked

    choice = choose_cpu_blas("auto", environ=environ or {}, system="linux", candidates=[openblas], cpu_backend=ON_CPU,
                             flags=lambda: flags, probe_kernels=probe)
    return choice, asked


@pytest.mark.parametrize(("flags", "picked", "forced"), [
    (AVX2, "Prescott", "Haswell"),  # a VM hiding its CPU model: OpenBLAS's fallback
    (AVX512, "Prescott", "SkylakeX"),
    (AVX512, "Haswell", "SkylakeX"),
    (AVX2, "Sandybridge", "Haswell"),
])
def test_auto_forces_the_newest_kernels_the_cpu_runs_where_openblas_picks_older(x86, openblas, flags, picked, forced):
    choice, asked = _auto(openblas, flags, picked)
    assert asked == [openblas]
    assert choice.library == openblas and choice.kernels == forced
    assert choice.worker_env({}) == {"LD_PRELOAD": openblas, "OPENBLAS_CORETYPE": forced}
    assert f"with its {forced} kernels" in choice.reason and f"it picks {picked}'s" in choice.reason


@pytest.mark.parametrize(("flags", "picked"), [
    (AVX2, "Haswell"),  # already the best
    (AVX512, "Cooperlake"),  # newer than the flags' best
    (AVX512, "Zen"),  # off the ladder: OpenBLAS knows this CPU
    (frozenset({"sse3", "avx"}), "Prescott"),  # a CPU older than Haswell
    (AVX2, None),  # not an OpenBLAS
])
def test_auto_keeps_openblas_own_pick_otherwise(x86, openblas, flags, picked):
    choice, _ = _auto(openblas, flags, picked)
    assert choice.library == openblas and choice.kernels is None
    assert choice.worker_env({}) == {"LD_PRELOAD": openblas}


def test_a_kernel_set_the_user_chose_is_kept(x86, openblas):
    choice, asked = _auto(openblas, AVX2, "Prescott", environ={"OPENBLAS_CORETYPE": "Sandybridge"})
    assert choice.kernels is None and asked == []
    assert choice.reason.endswith("with the kernels the environment names (OPENBLAS_CORETYPE=Sandybridge)")
    forced = BlasChoice(openblas, "", kernels="Haswell")
    assert forced.worker_env({"OPENBLAS_CORETYPE": "Sandybridge"}) == {"LD_PRELOAD": openblas}


def test_a_preloaded_openblas_is_asked_for_its_kernels_too(x86, openblas):
    choice, asked = _auto(openblas, AVX2, "Prescott", environ={"LD_PRELOAD": "/opt/libopenblas.so.0"})
    assert asked == ["/opt/libopenblas.so.0"] and choice.library is None
    assert choice.worker_env({"LD_PRELOAD": "/opt/libopenblas.so.0"}) == {"OPENBLAS_CORETYPE": "Haswell"}


def test_other_architectures_keep_their_kernels(monkeypatch, openblas):
    monkeypatch.setattr(cpu_blas, "on_x86_64", lambda: False)
    choice, asked = _auto(openblas, AVX2, "Prescott")
    assert choice.kernels is None and asked == []


def test_the_best_kernels_follow_the_flags():
    assert best_openblas_kernels(AVX512) == "SkylakeX"
    assert best_openblas_kernels(AVX512 - {"avx512vl"}) == "Haswell"
    assert best_openblas_kernels(AVX2 - {"fma"}) is None


def test_known_paths_name_this_machines_architecture():
    import platform

    assert all("linux-gnu" not in path or platform.machine() in path for path in known_openblas_paths())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux wheel (mlx[cpu]) is the CPU backend")
def test_mlx_on_linux_runs_on_the_cpu():
    from engines.cpu_blas import mlx_runs_on_cpu

    assert mlx_runs_on_cpu() is True
