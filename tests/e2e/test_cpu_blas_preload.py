"""``[server] cpu_blas``: workers of a CPU-backend MLX get the system OpenBLAS preloaded, and the log says so.

The proof is the worker's own memory map: the library is loaded into the process, not just
named in its environment.
"""

from __future__ import annotations

import _ctypes
import os
import shutil
import subprocess
import sys

import pytest

from engines.cpu_blas import KERNEL_LADDER, best_openblas_kernels, cpu_flags, known_openblas_paths, openblas_kernels

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD and /proc are Linux's")

OPENBLAS = next((path for path in known_openblas_paths() if os.path.isfile(path)), None)
needs_openblas = pytest.mark.skipif(OPENBLAS is None, reason="no system OpenBLAS (.ci/run installs libopenblas0-pthread)")
# The servers start with nothing preloaded, as from a user's shell (CI preloads it for the test run).
CLEAN_ENV = {"LD_PRELOAD": ""}


def _mapped_libraries(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[-1] for line in maps if line.rstrip().endswith(".so") or ".so." in line}


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        return dict(entry.decode().partition("=")[::2] for entry in environ.read().split(b"\0") if entry)


def _serve(servers, tiny_models, **server):
    return servers.start({"tiny": {"path": str(tiny_models.path("llama"))}}, server=server, env=CLEAN_ENV)


@needs_openblas
def test_auto_preloads_the_system_openblas_into_workers(servers, tiny_models):
    live = _serve(servers, tiny_models)
    assert f"cpu_blas: MLX runs on its CPU backend: workers preload {OPENBLAS}" in live.log()
    assert os.path.realpath(OPENBLAS) in _mapped_libraries(live.worker_pid("tiny"))
    reply = live.openai().completions.create(model="tiny", prompt="hi", max_tokens=4)
    assert reply.usage.completion_tokens >= 1

    # The kernels: OpenBLAS's own pick, unless the CPU's flags run a newer set of the ladder.
    picked, best = openblas_kernels(OPENBLAS), best_openblas_kernels(cpu_flags())
    worker = _environ(live.worker_pid("tiny"))
    if os.environ.get("OPENBLAS_CORETYPE"):
        assert worker["OPENBLAS_CORETYPE"] == os.environ["OPENBLAS_CORETYPE"]  # the user's pick stands
        assert f"(OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']})" in live.log()
    elif best and picked in KERNEL_LADDER and KERNEL_LADDER.index(picked) < KERNEL_LADDER.index(best):
        assert worker["OPENBLAS_CORETYPE"] == best
        assert f"with its {best} kernels (OPENBLAS_CORETYPE={best}: it picks {picked}'s on its own" in live.log()
    else:
        assert not worker.get("OPENBLAS_CORETYPE") and "OPENBLAS_CORETYPE" not in live.log()


def _kernels_when_preloaded(library: str, coretype: str | None = None) -> str:
    """The set OpenBLAS reports in a process started with ``library`` preloaded, as a worker
    starts, asked without engines.cpu_blas (the code under test)."""
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    env |= {"LD_PRELOAD": library} | ({"OPENBLAS_CORETYPE": coretype} if coretype else {})
    preloaded = subprocess.run(
        [sys.executable, "-c", "import ctypes; f = ctypes.CDLL(None).openblas_get_corename; "
         "f.restype = ctypes.c_char_p; print(f().decode())"],
        env=env, capture_output=True, text=True, check=True)
    return preloaded.stdout.strip()


@needs_openblas
def test_the_probe_names_the_kernels_openblas_picks_here():
    """Asked from a child process, the library names the set it picks when a worker preloads it."""
    assert openblas_kernels(OPENBLAS) == _kernels_when_preloaded(OPENBLAS) != ""
    assert openblas_kernels("/etc/hostname") is None  # not a library
    assert openblas_kernels(_ctypes.__file__) is None  # a shared library without OpenBLAS's symbols


# What OpenBLAS does on a VM that hides its CPU model: it picks Prescott's kernels. This machine's
# cpuid cannot be made to hide its model from user space, so a library linked against the real
# OpenBLAS stands in for its CPU detection only: it answers "Prescott" unless OPENBLAS_CORETYPE
# names a set, and then passes the question on to OpenBLAS, which took that set when it loaded.
# Every cblas call still goes to the real OpenBLAS, which the library pulls in as its dependency.
HIDDEN_MODEL_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

char *openblas_get_corename(void) {
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced != NULL && *forced != '\0') {
        char *(*openblas)(void) = (char *(*)(void))dlsym(RTLD_NEXT, "openblas_get_corename");
        return openblas();
    }
    return "Prescott";
}
"""


@pytest.fixture
def openblas_on_a_hidden_model(tmp_path):
    """A library path that behaves as the system OpenBLAS does on a VM that hides its CPU model."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc to build the stand-in library")
    source, library = tmp_path / "hidden_model.c", tmp_path / "libhiddenmodelblas.so"
    source.write_text(HIDDEN_MODEL_C)
    real = os.path.realpath(OPENBLAS)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source), "-Wl,--no-as-needed",
                    f"-Wl,-rpath,{os.path.dirname(real)}", real, "-ldl"], check=True, capture_output=True)
    return str(library)


@needs_openblas
@pytest.mark.skipif(best_openblas_kernels(cpu_flags()) is None, reason="the CPU runs no kernel set newer than Prescott's")
def test_workers_get_the_cpus_kernels_where_openblas_would_pick_older_ones(servers, tiny_models,
                                                                          openblas_on_a_hidden_model):
    best = best_openblas_kernels(cpu_flags())
    live = servers.start({"tiny": {"path": str(tiny_models.path("llama"))}},
                         server={"cpu_blas": openblas_on_a_hidden_model},
                         env={**CLEAN_ENV, "OPENBLAS_CORETYPE": ""})
    assert (f"workers preload {openblas_on_a_hidden_model} (cpu_blas), with its {best} kernels "
            f"(OPENBLAS_CORETYPE={best}: it picks Prescott's on its own, which this CPU's flags outrun)") in live.log()
    pid = live.worker_pid("tiny")
    worker = _environ(pid)
    assert worker["OPENBLAS_CORETYPE"] == best
    assert {os.path.realpath(openblas_on_a_hidden_model), os.path.realpath(OPENBLAS)} <= _mapped_libraries(pid)
    reply = live.openai().completions.create(model="tiny", prompt="hi", max_tokens=4)
    assert reply.usage.completion_tokens >= 1
    # OpenBLAS, loaded as the worker loads it, runs the set it was given.
    assert _kernels_when_preloaded(worker["LD_PRELOAD"], worker["OPENBLAS_CORETYPE"]) == best


@needs_openblas
def test_off_leaves_workers_on_the_bundled_blas(servers, tiny_models):
    live = _serve(servers, tiny_models, cpu_blas="off")
    assert 'cpu_blas: cpu_blas = "off"' in live.log()
    assert os.path.realpath(OPENBLAS) not in _mapped_libraries(live.worker_pid("tiny"))


@needs_openblas
def test_an_explicit_path_is_preloaded(servers, tiny_models):
    real = os.path.realpath(OPENBLAS)
    live = _serve(servers, tiny_models, cpu_blas=real)
    assert f"workers preload {real} (cpu_blas)" in live.log()
    assert real in _mapped_libraries(live.worker_pid("tiny"))
