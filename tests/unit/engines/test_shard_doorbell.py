"""The doorbell of a sharded model's idle ranks, with two ranks as threads of this process."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from engines.shard.doorbell import DoorbellClosedError, leader_address, open_doorbell


class ThreadGroup:
    """``Lockstep.share_bytes`` for ranks that are threads: rank 0's payload reaches every rank."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size)
        self._payload: bytes | None = None

    def rank(self, index: int) -> ThreadRank:
        return ThreadRank(self, index)

    def share(self, payload: bytes | None) -> bytes:
        if payload is not None:
            self._payload = payload
        self._barrier.wait()
        shared = self._payload
        self._barrier.wait()
        return shared


class ThreadRank:
    def __init__(self, group: ThreadGroup, index: int) -> None:
        self._group, self.rank, self.size = group, index, group.size

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def share_bytes(self, payload: bytes | None) -> bytes:
        return self._group.share(payload)


def open_all(size: int, environ: dict[str, str]):
    group = ThreadGroup(size)
    doorbells: dict[int, object] = {}

    def run(index: int) -> None:
        doorbells[index] = open_doorbell(group.rank(index), environ)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return doorbells


@pytest.fixture
def hostfile(tmp_path):
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps([["127.0.0.1:5000"], ["127.0.0.1:5001"], ["127.0.0.1:5002"]]))
    return {"MLX_HOSTFILE": str(path)}


def test_dozing_ranks_wake_when_rank_0_rings(hostfile):
    doorbells = open_all(3, hostfile)
    woke = threading.Event()
    waiting = [threading.Thread(target=lambda d=doorbells[i]: (d.doze(), woke.set())) for i in (1, 2)]
    for thread in waiting:
        thread.start()
    assert not woke.wait(0.2)  # nobody rang
    doorbells[0].ring()
    for thread in waiting:
        thread.join(timeout=5)
        assert not thread.is_alive()
    for doorbell in doorbells.values():
        doorbell.close()


def test_a_dozing_rank_learns_that_rank_0_is_gone(hostfile):
    doorbells = open_all(2, hostfile)
    doorbells[0].close()
    with pytest.raises(DoorbellClosedError):
        doorbells[1].doze()


def test_without_an_address_every_rank_goes_without():
    assert open_all(2, {}) == {0: None, 1: None}


def test_a_connection_without_the_secret_is_dropped(hostfile, monkeypatch):
    """A stranger who connects first does not take a rank's place."""
    import engines.shard.doorbell as doorbell_module

    real_connect = socket.create_connection

    def stranger_first(address, timeout=None):
        with real_connect(address) as stranger:
            stranger.sendall(b"x" * doorbell_module.SECRET_BYTES)
            stranger.recv(1)  # the leader hangs up on it
        return real_connect(address, timeout=timeout)

    monkeypatch.setattr(doorbell_module.socket, "create_connection", stranger_first)
    doorbells = open_all(2, hostfile)
    doorbells[0].ring()
    doorbells[1].doze()


@pytest.mark.parametrize(("environ", "address"), [
    ({"MLX_JACCL_COORDINATOR": "10.0.0.1:4000"}, "10.0.0.1"),
    ({"MLX_JACCL_COORDINATOR": "[fe80::1]:4000"}, "fe80::1"),
    ({}, None),
])
def test_leader_address(environ, address):
    assert leader_address(environ) == address


def test_leader_address_from_the_ring_hostfile(tmp_path):
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps([["192.168.1.2:5000", "192.168.1.2:5001"], ["192.168.1.3:5000"]]))
    assert leader_address({"MLX_HOSTFILE": str(path)}) == "192.168.1.2"
    path.write_text("not json")
    assert leader_address({"MLX_HOSTFILE": str(path)}) is None
