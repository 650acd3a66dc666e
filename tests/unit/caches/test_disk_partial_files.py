"""At start the disk tier removes the half-written files a crashed writer left, and keeps the ones
another live process (the other worker of a reload, sharing the directory) is still writing.

A file being written is named ``<hash>.<pid>.<thread>.partial.safetensors``; real processes
supply the pids: one that has exited, one still running, and this process itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm.models.cache import KVCache

from caches.disk import DiskTier

FINGERPRINT = "c" * 32


def partial(tier: DiskTier, token_hash: str, pid: int) -> Path:
    path = tier.directory / f"{token_hash}.{pid}.{140000000000 + pid}.partial.safetensors"
    path.write_bytes(b"half of a safetensors file")
    return path


def scan(tier: DiskTier):
    """scan() and stop the threads it starts."""
    try:
        return tier.scan()
    finally:
        tier.flush(timeout_s=0)


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture
def live_pid():
    process = subprocess.Popen(["sleep", "30"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_a_dead_writers_partial_file_goes_and_a_live_ones_stays(tmp_path, live_pid):
    tier = DiskTier(tmp_path, FINGERPRINT, budget_bytes=1 << 30)
    crashed = partial(tier, "a" * 32, dead_pid())
    writing = partial(tier, "b" * 32, live_pid)
    assert scan(tier) == []  # neither is an entry
    assert not crashed.exists()
    assert writing.exists()
    assert tier.stats.entries == 0 and tier.stats.removed_unreadable == 0


def test_a_partial_file_of_this_process_is_a_leftover_too(tmp_path):
    # Before scan() this process's writer has not started: a file under its own pid is from an
    # earlier process that happened to have the same pid.
    tier = DiskTier(tmp_path, FINGERPRINT, budget_bytes=1 << 30)
    mine = partial(tier, "d" * 32, os.getpid())
    scan(tier)
    assert not mine.exists()


def test_a_partial_file_whose_name_carries_no_pid_is_removed(tmp_path):
    tier = DiskTier(tmp_path, FINGERPRINT, budget_bytes=1 << 30)
    odd = tier.directory / ("e" * 32 + ".partial.safetensors")
    odd.write_bytes(b"x")
    garbled = tier.directory / ("f" * 32 + ".notapid.1.partial.safetensors")
    garbled.write_bytes(b"x")
    scan(tier)
    assert not odd.exists() and not garbled.exists()


def test_another_fingerprints_partial_files_are_not_touched(tmp_path):
    other = DiskTier(tmp_path, "0" * 32, budget_bytes=1 << 30)
    theirs = partial(other, "a" * 32, dead_pid())
    scan(DiskTier(tmp_path, FINGERPRINT, budget_bytes=1 << 30))
    assert theirs.exists()


def test_finished_entries_beside_the_leftovers_are_kept(tmp_path):
    writer = DiskTier(tmp_path, FINGERPRINT, budget_bytes=1 << 30)
    writer.scan()
    cache = KVCache()
    cache.update_and_fetch(mx.zeros((1, 1, 3, 4)), mx.ones((1, 1, 3, 4)))
    cache.keys, cache.values = cache.keys[..., :3, :], cache.values[..., :3, :]
    mx.eval(cache.keys, cache.values)
    assert writer.offer([1, 2, 3], [cache], 1, 100, True, 0)
    assert writer.flush(timeout_s=30) == 0
    leftover = partial(writer, "a" * 32, dead_pid())
    (entry,) = scan(DiskTier(tmp_path, FINGERPRINT, budget_bytes=1 << 30))
    assert entry.tokens == (1, 2, 3)
    assert not leftover.exists()
    assert [p.name for p in writer.directory.iterdir()] == [entry.name + ".safetensors"]
