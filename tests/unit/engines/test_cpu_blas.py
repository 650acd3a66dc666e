"""Which BLAS workers preload: ``[server] cpu_blas`` resolved against this machine's facts."""

from __future__ import annotations

import sys

import pytest

from engines.cpu_blas import BlasChoice, choose_cpu_blas, known_openblas_paths

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


def test_known_paths_name_this_machines_architecture():
    import platform

    assert all("linux-gnu" not in path or platform.machine() in path for path in known_openblas_paths())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux wheel (mlx[cpu]) is the CPU backend")
def test_mlx_on_linux_runs_on_the_cpu():
    from engines.cpu_blas import mlx_runs_on_cpu

    assert mlx_runs_on_cpu() is True
