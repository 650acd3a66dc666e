"""``[server] cpu_blas``: workers of a CPU-backend MLX get the system OpenBLAS preloaded, and the log says so.

The proof is the worker's own memory map: the library is loaded into the process, not just
named in its environment.
"""

from __future__ import annotations

import os
import sys

import pytest

from engines.cpu_blas import known_openblas_paths

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD and /proc are Linux's")

OPENBLAS = next((path for path in known_openblas_paths() if os.path.isfile(path)), None)
needs_openblas = pytest.mark.skipif(OPENBLAS is None, reason="no system OpenBLAS (.ci/run installs libopenblas0-pthread)")
# The servers start with nothing preloaded, as from a user's shell (CI preloads it for the test run).
CLEAN_ENV = {"LD_PRELOAD": ""}


def _mapped_libraries(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[-1] for line in maps if line.rstrip().endswith(".so") or ".so." in line}


def _serve(servers, tiny_models, **server):
    return servers.start({"tiny": {"path": str(tiny_models.path("llama"))}}, server=server, env=CLEAN_ENV)


@needs_openblas
def test_auto_preloads_the_system_openblas_into_workers(servers, tiny_models):
    live = _serve(servers, tiny_models)
    assert f"cpu_blas: MLX runs on its CPU backend: workers preload {OPENBLAS}" in live.log()
    assert os.path.realpath(OPENBLAS) in _mapped_libraries(live.worker_pid("tiny"))
    reply = live.openai().completions.create(model="tiny", prompt="hi", max_tokens=4)
    assert reply.usage.completion_tokens >= 1


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
