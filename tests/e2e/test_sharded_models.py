"""Models sharded across processes with mlx.launch: two local ranks on loopback (ring backend)
give the same greedy tokens as one process under batching, and a rank that dies takes its
group down; the router starts a new group with nothing of the old one left."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.support.server import wait_for

EOS_BLOCK = {"2": -100}
CONCURRENCY = 4
MAX_TOKENS = 24
SHARD_CLIENTS = ("tensor", "pipeline", "tensor_llama")


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    # 4 attention heads and 2 KV heads: tensor mode splits both evenly over 2 ranks.
    qwen2 = str(tiny_models.path("qwen2", hidden_size=128, num_layers=4))
    llama = str(tiny_models.path("llama", hidden_size=128))
    common = {"max_concurrency": CONCURRENCY}
    live = servers.start({
        "solo": {"path": qwen2, **common},
        "tensor": {"path": qwen2, "shard": {"hosts": ["127.0.0.1", "127.0.0.1"], "mode": "tensor"}, **common},
        "pipeline": {"path": qwen2, "shard": {"hosts": 2, "mode": "pipeline", "backend": "ring"}, **common},
        "solo_llama": {"path": llama, **common},
        "tensor_llama": {"path": llama, "shard": {"hosts": 2}, **common},
        # mlx-lm has no llama pipeline; loaded on first request (a preloaded model that fails keeps /ready at 503).
        "pipeline_llama": {"path": llama, "shard": {"hosts": 2, "mode": "pipeline"}, "preload": False, **common},
    })
    yield live
    # Stopped with the module, not the session: four groups' ranks hold memory the later tests want.
    live.stop()


def body(model: str, i: int) -> dict:
    # The last prompt is long enough that its request takes rank 0 two collectives to share.
    repeats = 150 if i == CONCURRENCY - 1 else i + 1
    return {"model": model, "messages": [{"role": "user", "content": f"request number {i} " * repeats}],
            "max_tokens": MAX_TOKENS, "temperature": 0, "logit_bias": EOS_BLOCK, "logprobs": True}


def token_logprobs(response: httpx.Response) -> list[tuple[str, float]]:
    assert response.status_code == 200, response.text
    content = response.json()["choices"][0]["logprobs"]["content"]
    return [(entry["token"], entry["logprob"]) for entry in content]


async def concurrently(base_url: str, model: str) -> list[list[tuple[str, float]]]:
    async with httpx.AsyncClient(base_url=base_url, timeout=180) as client:
        responses = await asyncio.gather(*(client.post("/v1/chat/completions", json=body(model, i)) for i in range(CONCURRENCY)))
    return [token_logprobs(response) for response in responses]


def sequentially(base_url: str, model: str) -> list[list[tuple[str, float]]]:
    with httpx.Client(base_url=base_url, timeout=180) as client:
        return [token_logprobs(client.post("/v1/chat/completions", json=body(model, i))) for i in range(CONCURRENCY)]


def assert_same_tokens(sharded: list[list[tuple[str, float]]], solo: list[list[tuple[str, float]]]) -> None:
    for got, want in zip(sharded, solo, strict=True):
        assert [token for token, _ in got] == [token for token, _ in want]
        assert len(got) == MAX_TOKENS
        # The same numbers up to float summation order (partial sums meet in a different order).
        assert all(abs(a - b) < 1e-3 for (_, a), (_, b) in zip(got, want)), (got, want)


@pytest.mark.parametrize(("sharded", "solo"), [("tensor", "solo"), ("pipeline", "solo"), ("tensor_llama", "solo_llama")])
def test_two_ranks_give_one_process_greedy_tokens_under_batching(server, sharded, solo):
    expected = sequentially(server.base_url, solo)
    assert len({tuple(tokens) for tokens in expected}) > 1  # the prompts lead to different outputs
    assert_same_tokens(asyncio.run(concurrently(server.base_url, sharded)), expected)
    assert_same_tokens(sequentially(server.base_url, sharded), expected)


def test_an_aborted_request_frees_its_slot_on_every_rank(server):
    """A client that leaves mid-stream aborts on all ranks: the group keeps serving in lockstep."""
    with httpx.Client(base_url=server.base_url, timeout=180) as client:
        stream_body = {**body("tensor", 0), "max_tokens": 2000, "stream": True}
        for _ in range(CONCURRENCY + 1):  # more than the batch holds: every abort must free its slot
            with client.stream("POST", "/v1/chat/completions", json=stream_body) as response:
                lines = response.iter_lines()
                assert response.status_code == 200
                for _ in range(3):
                    next(lines)
        expected = sequentially(server.base_url, "solo")
    assert_same_tokens(sequentially(server.base_url, "tensor"), expected)


# ---------------------------------------------------------------------- processes


def _processes() -> dict[int, tuple[int, bytes]]:
    """pid → (parent pid, command line) of every process we can read."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
                if stat[0] != "Z":
                    found[int(entry.name)] = (int(stat[1]), (entry / "cmdline").read_bytes())
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return found


def shard_group(server, model_id: str) -> dict[str, int]:
    """The launcher and the ranks of a sharded model: {"launcher": pid, "rank0": pid, "rank1": pid}."""
    table = _processes()
    marker = b"\0--model-id\0" + model_id.encode() + b"\0"
    launchers = [pid for pid, (parent, cmd) in table.items()
                 if parent == server.process.pid and b"engines.shard.launcher" in cmd and marker in cmd]
    assert len(launchers) <= 1, launchers
    if not launchers:
        return {}
    group = {"launcher": launchers[0]}
    for pid, (parent, cmd) in table.items():
        if parent == launchers[0] and b"engines.shard.worker" in cmd:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            # Without MLX_RANK: the launcher's shell, a moment before it execs the rank.
            for item in environ:
                if item.startswith(b"MLX_RANK="):
                    group[f"rank{item[9:].decode()}"] = pid
    return group


def whole_group(server, model_id: str) -> dict[str, int] | None:
    """The launcher and both ranks, once all three are up (None before)."""
    group = shard_group(server, model_id)
    return group if len(group) == 3 else None


def restarts_of(server, model_id: str) -> int:
    return server.status()["models"][model_id]["restarts"]


def alive(pid: int) -> bool:
    return pid in _processes()


def test_a_killed_rank_restarts_the_whole_group(server):
    expected = sequentially(server.base_url, "solo")
    assert_same_tokens(sequentially(server.base_url, "tensor"), expected)
    old = wait_for(lambda: whole_group(server, "tensor"), what="the tensor group")
    restarts = restarts_of(server, "tensor")

    os.kill(old["rank1"], signal.SIGKILL)

    wait_for(lambda: not any(alive(pid) for pid in old.values()), timeout_s=60, what="the old group to be gone")
    new = wait_for(lambda: whole_group(server, "tensor"), timeout_s=90, what="a new group")
    assert not set(new.values()) & set(old.values())

    def serves() -> bool:
        response = httpx.post(server.base_url + "/v1/chat/completions", json=body("tensor", 0), timeout=180)
        return response.status_code == 200
    wait_for(serves, timeout_s=120, what="the restarted group to serve")
    assert_same_tokens(sequentially(server.base_url, "tensor"), expected)
    assert restarts_of(server, "tensor") == restarts + 1
    assert server.status()["models"]["tensor"]["pid"] == new["launcher"]


def test_a_killed_launcher_takes_its_ranks_with_it(server):
    """Killing mlx.launch alone would orphan the ranks; the router kills the whole process group."""
    old = wait_for(lambda: whole_group(server, "pipeline"), what="the pipeline group")
    os.kill(old["launcher"], signal.SIGKILL)
    wait_for(lambda: not any(alive(pid) for pid in old.values()), timeout_s=60, what="the old ranks to be gone")
    new = wait_for(lambda: whole_group(server, "pipeline"), timeout_s=90, what="a new group")
    assert not set(new.values()) & set(old.values())
    wait_for(lambda: httpx.post(server.base_url + "/v1/chat/completions", json=body("pipeline", 1), timeout=180).status_code == 200,
             timeout_s=120, what="the restarted group to serve")


def test_unloading_stops_every_rank_and_loading_serves_again(server):
    old = wait_for(lambda: whole_group(server, "tensor_llama"), what="the tensor_llama group")
    assert httpx.post(server.base_url + "/admin/models/tensor_llama/unload", timeout=60).status_code == 200
    wait_for(lambda: not any(alive(pid) for pid in old.values()), timeout_s=30, what="every rank to exit")
    assert httpx.post(server.base_url + "/admin/models/tensor_llama/load", timeout=180).status_code == 200
    assert_same_tokens(sequentially(server.base_url, "tensor_llama"), sequentially(server.base_url, "solo_llama"))


def test_seeded_sampling_under_a_grammar_matches_one_process(server):
    """Sampled tokens and grammar masks agree on every rank: the same text as one process."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city", "n"]}

    def ask(model: str, seed: int) -> str:
        reply = httpx.post(server.base_url + "/v1/chat/completions", timeout=180, json={
            "model": model, "messages": [{"role": "user", "content": "weather in paris"}], "max_tokens": 64,
            "temperature": 1.0, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": schema, "strict": True}}})
        assert reply.status_code == 200, reply.text
        return reply.json()["choices"][0]["message"]["content"]

    for seed in range(3):
        text = ask("tensor", seed)
        assert text == ask("solo", seed)
        assert text == ask("pipeline", seed)


def test_an_architecture_without_that_sharding_fails_to_load_with_the_reason(server):
    reply = httpx.post(server.base_url + "/v1/chat/completions", json=body("pipeline_llama", 0), timeout=180)
    assert reply.status_code == 503 and "no pipeline sharding" in reply.json()["error"]["message"], reply.text
    status = server.status()["models"]["pipeline_llama"]
    assert status["state"] == "failed"
    assert "no pipeline sharding for architecture 'llama'; it supports tensor mode" in status["last_error"]
    wait_for(lambda: shard_group(server, "pipeline_llama") == {}, timeout_s=30, what="nothing of the group left running")
