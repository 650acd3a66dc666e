"""The bytes rank 0 shares before each step, and the mlx.launch command line (engines/shard/)."""

from __future__ import annotations

import socket
import sys

import mlx.core as mx
import pytest

from engines.protocol import AbortRequest, AddRequest, SamplingParams, ShardSpec, Shutdown, WorkerSpec
from engines.shard.launch import free_port_run, launch_argv
from engines.shard.lockstep import INLINE_BYTES, Lockstep, decode_inputs, encode_inputs
from engines.shard.worker import _with_seed

REQUEST = AddRequest("r1", [1, 2, 3], 8, SamplingParams(temperature=0.0), [0], snapshot_at=(2,), grammar="")


def test_inputs_round_trip_in_order():
    inputs = [REQUEST, AbortRequest(["r0"]), Shutdown()]
    assert decode_inputs(encode_inputs(inputs)) == inputs
    assert encode_inputs([]) == b"" and decode_inputs(b"") == []


def test_a_group_of_one_shares_its_own_bytes():
    # The singleton group runs the same all_sum path as a real group (a sum over one rank).
    lockstep = Lockstep(mx.distributed.init())
    assert lockstep.leader and lockstep.size == 1
    for size in (1, INLINE_BYTES - 8, INLINE_BYTES - 7, 5 * INLINE_BYTES):  # inline, full, one byte over, long
        payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
        assert lockstep.share_bytes(payload) == payload
    assert lockstep.share_bytes(b"") == b""
    assert lockstep.share_inputs([REQUEST]) == [REQUEST]
    with pytest.raises(ValueError):
        lockstep.share_bytes(None)  # rank 0 always has something to say, if only "nothing"


def test_unseeded_sampled_requests_get_a_seed_every_rank_shares():
    sampled = AddRequest("r2", [1], 4, SamplingParams(temperature=0.7), [0])
    seeded = _with_seed(sampled)
    assert seeded.sampling.seed is not None and seeded.sampling.temperature == 0.7
    assert _with_seed(REQUEST) is REQUEST  # greedy needs none
    fixed = AddRequest("r3", [1], 4, SamplingParams(temperature=0.7, seed=5), [0])
    assert _with_seed(fixed) is fixed


def test_launch_argv_runs_every_rank_of_the_model():
    spec = WorkerSpec(model_id="big", model_path="/m", socket_path="/s", token="secret", max_concurrency=1, prefill_step=16,
                      max_context=64, shard=ShardSpec(hosts=["127.0.0.1", "10.0.0.2"], mode="pipeline"))
    argv = launch_argv(spec, starting_port=4000, python=sys.executable)
    assert argv[:3] == [sys.executable, "-m", "engines.shard.launcher"]
    assert argv[3:argv.index("--")] == ["--backend", "ring", "--hosts", "127.0.0.1,10.0.0.2", "--starting-port", "4000"]
    assert argv[argv.index("--") + 1:] == [sys.executable, "-m", "engines.shard.worker", "--model-id", "big", "--backend", "ring"]
    assert "secret" not in " ".join(argv)  # the token travels in rank 0's environment only


def test_free_port_run_is_free_now():
    start = free_port_run(3)
    for port in range(start, start + 3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
