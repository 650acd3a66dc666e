"""`[models.<id>.shard]`: what a launchable group is, checked at validate time with the TOML path."""

from __future__ import annotations

import pytest

from engines.protocol import ShardSpec
from engines.shard.launch import rank_count
from router.ops.config import ConfigError, load_config_text
from router.ops.reload.diff import diff_models

BASE = '[models.big]\npath = "org/big"\n'


def shard_of(extra: str):
    return load_config_text(BASE + extra + "\n", env={}).models["big"].shard


def errors_of(extra: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(BASE + extra + "\n", env={}, source="rapidmlx.toml")
    return caught.value.errors


def test_no_shard_table_means_one_process():
    shard = load_config_text(BASE, env={}).models["big"].shard
    assert not shard.enabled and shard.host_list == ()


def test_a_count_is_that_many_loopback_ranks():
    shard = shard_of('shard = { hosts = 2, mode = "pipeline" }')
    assert shard.enabled and shard.host_list == ("127.0.0.1", "127.0.0.1")
    assert (shard.backend, shard.mode) == ("ring", "pipeline")


def test_a_list_keeps_rank_order():
    assert shard_of('shard = { hosts = ["127.0.0.1", "10.1.2.3"] }').host_list == ("127.0.0.1", "10.1.2.3")


@pytest.mark.parametrize(("extra", "message"), [
    ("shard = { hosts = 1 }", "models.big.shard.hosts: must be a list of IP addresses or a count of at least 2 ranks (got 1)"),
    ('shard = { hosts = ["127.0.0.1"] }', "models.big.shard: hosts: a sharded model needs at least 2 ranks"),
    ('shard = { hosts = ["127.0.0.1", "mac2.local"] }', "models.big.shard: hosts: mlx.launch needs IP addresses, not mac2.local"),
    ('shard = { hosts = ["192.0.2.7", "127.0.0.1"] }',
     "models.big.shard: hosts: the first host (rank 0) must be this machine, not 192.0.2.7"),
    ('shard = { hosts = 2, backend = "jaccl" }', "models.big.shard: backend \"jaccl\" needs a hostfile naming each host's RDMA devices"),
    ('shard = { hosts = 2, backend = "mpi" }', 'models.big.shard.backend: must be "ring" or "jaccl" (got "mpi")'),
    ('shard = { hosts = 2, mode = "data" }', 'models.big.shard.mode: must be "tensor" or "pipeline" (got "data")'),
    ('shard = { hosts = 2, hostfile = "/nonexistent/hosts.json" }', "models.big.shard: hostfile: /nonexistent/hosts.json is not a file"),
])
def test_unlaunchable_groups_are_refused_with_their_path(extra, message):
    assert errors_of(extra) == [message]


def test_a_hostfile_replaces_the_hosts_and_their_checks(tmp_path):
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text('{"backend": "jaccl", "hosts": [{"ssh": "mac1"}, {"ssh": "mac2"}, {"ssh": "mac3"}]}')
    shard = shard_of(f'shard = {{ backend = "jaccl", hostfile = "{hostfile}" }}')
    assert shard.enabled and shard.hostfile == str(hostfile) and shard.host_list == ()
    assert rank_count(ShardSpec(hosts=[], backend="jaccl", hostfile=str(hostfile))) == 3
    hostfile.write_text("[]")
    with pytest.raises(OSError, match="lists no hosts"):
        rank_count(ShardSpec(hosts=[], hostfile=str(hostfile)))


def test_changing_the_shard_replaces_the_worker():
    old = load_config_text(BASE, env={}).models
    new = load_config_text(BASE + "shard = { hosts = 2 }\n", env={}).models
    (change,) = diff_models(old, new)
    assert change.kind == "engine" and change.fields == ("shard.hosts",)


def test_the_memory_estimate_counts_the_ranks_on_this_machine(tiny_models):
    from router.ops.memory import estimate_memory

    checkpoint = tiny_models.path("qwen3")

    def estimate(extra: str = ""):
        config = load_config_text(f'[models.m]\npath = "{checkpoint}"\n{extra}\n', env={}).models["m"]
        return estimate_memory(checkpoint, config, max_context=1000)

    whole, loopback = estimate(), estimate("shard = { hosts = 2 }")
    assert (loopback.weights_bytes, loopback.kv_bytes) == (whole.weights_bytes, whole.kv_bytes)  # both ranks are here
    assert whole.prefix_cache_bytes > 0 and loopback.prefix_cache_bytes == 0  # sharded models have none
    split = estimate('shard = { hosts = ["127.0.0.1", "10.0.0.2"] }')
    assert (split.weights_bytes, split.kv_bytes) == (whole.weights_bytes // 2, whole.kv_bytes // 2)
