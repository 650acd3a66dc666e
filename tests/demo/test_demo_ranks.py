"""The demo build on data-parallel ranks (engines/demo/ranks.py): real processes on loopback.

Each test starts ``rapid-mlx demo build`` as a user would and watches its processes through
/proc (Linux; the ranks themselves are backend-neutral).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")]

FEW_STEPS = ("--steps", "6", "--restart-steps", "2", "--copy-steps", "2", "--polish-steps", "2")


def _build(out: Path, *args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "router.cli", "demo", "build", "--out", str(out), "--no-quantized", "--no-eval", *args],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _weights_digest(out: Path) -> str:
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def test_two_ranks_train_what_one_process_trains_and_rebuild_bit_for_bit(tmp_path):
    one = _build(tmp_path / "one", *FEW_STEPS, "--ranks", "1")
    two = _build(tmp_path / "two", *FEW_STEPS, "--ranks", "2")
    again = _build(tmp_path / "again", *FEW_STEPS, "--ranks", "2")
    assert two["recipe"]["ranks"] == 2 and one["recipe"]["ranks"] == 1
    # The same batches and the same gradient, summed in another order: the same losses to rounding.
    assert two["final_loss"] == pytest.approx(one["final_loss"], rel=1e-3)
    assert _weights_digest(tmp_path / "two") == _weights_digest(tmp_path / "again")
    assert _weights_digest(tmp_path / "two") != _weights_digest(tmp_path / "one")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _start_long_build(tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """A build of 400 steps on two ranks, once its second rank is training; returns it and that rank's pid.
    Its temporary files go to ``tmp_path / "tmp"``."""
    log = tmp_path / "build.log"
    (tmp_path / "tmp").mkdir()
    build = subprocess.Popen(
        [sys.executable, "-m", "router.cli", "demo", "build", "--out", str(tmp_path / "out"), "--no-quantized",
         "--no-eval", "--steps", "400", "--restart-steps", "0", "--copy-steps", "0", "--polish-steps", "0",
         "--ranks", "2"],
        stdout=subprocess.DEVNULL, stderr=log.open("w"), env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    deadline = time.monotonic() + 300  # a liveness bound, not a speed check: other jobs on the cores slow the start
    while "step 25/400" not in log.read_text():
        assert build.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    children = _children(build.pid)
    assert len(children) == 1, children
    return build, children[0], log


def test_a_rank_that_dies_ends_the_build_with_an_error(tmp_path):
    build, rank, log = _start_long_build(tmp_path)
    os.kill(rank, signal.SIGKILL)
    assert build.wait(timeout=60) == 1
    assert "rank 1 exited with status -9; stopping the build" in log.read_text()
    assert not (tmp_path / "out" / "model.safetensors").exists()
    # The ring's hostfile went once the ranks had joined: a build ended this way leaves none of
    # its files in /tmp (MLX keeps a directory of its own there).
    assert not list((tmp_path / "tmp").glob("rapidmlx-*"))


def test_a_rank_exits_when_its_build_is_gone(tmp_path):
    build, rank, _ = _start_long_build(tmp_path)
    build.kill()
    build.wait()
    deadline = time.monotonic() + 30
    while not _gone(rank):
        assert time.monotonic() < deadline, "rank 1 outlived its build"
        time.sleep(0.2)
    assert not list((tmp_path / "tmp").glob("rapidmlx-*"))
