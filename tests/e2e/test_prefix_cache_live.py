"""The prefix cache through a live server: agent turns report cached tokens on every API,
concurrent sessions sharing a system prompt stay exact, and the status call shows the cache.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from router.bench.cli import main as bench_main

pytestmark = pytest.mark.slow

EOS_BLOCK = {"2": -100}
SYSTEM = "You are a coding agent. " + "Follow the repository conventions and keep answers short. " * 40


@pytest.fixture(scope="module")
def cached(servers, tiny_models):
    return servers.start({"qwen": {"path": str(tiny_models.path("qwen3")), "max_concurrency": 8}})


@pytest.fixture(scope="module")
def uncached(servers, tiny_models):
    return servers.start({"qwen": {"path": str(tiny_models.path("qwen3")), "prefix_cache": {"enabled": False}}})


@pytest.fixture(scope="module")
def hybrid(servers, tiny_models):
    # Thinking off: the generation prompt then ends in an empty think block that the next turn's
    # history does not contain, so the end-of-prompt snapshot is off the next turn's path.
    return servers.start({"qwen": {"path": str(tiny_models.path("qwen3_next")), "max_concurrency": 8,
                                   "chat_template_kwargs": {"enable_thinking": False}}})


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_next"])
def test_an_agent_replay_reports_cached_tokens_on_every_turn_after_the_first(arch, request, tiny_models, tmp_path):
    # qwen3_next's linear-attention state cannot rewind: its hits come from the snapshot at the
    # turn boundary the router names (the history before the generation prompt).
    server = request.getfixturevalue("cached" if arch == "qwen3" else "hybrid")
    assert bench_main(["agent", "--base-url", server.base_url, "--model", "qwen", "--sessions", "2", "--turns", "4",
                       "--tool-time", "0", "--profile", "tiny", "--max-tokens", "4",
                       "--tokenizer", str(tiny_models.path(arch)), "--out", str(tmp_path)]) == 0
    records = json.loads((tmp_path / "results.json").read_text())["records"]
    later = [r for r in records if r["turn"] >= 2]
    assert len(later) == 6
    for record in later:
        # What the previous turn made reusable (its prompt, rendered here with the same template).
        assert record["cached_tokens"] >= 0.95 * record["ideal_cached_tokens"] > 0, record


def _turn(messages: list[dict]) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, *messages]


def test_cached_tokens_in_every_apis_usage(cached):
    oai, claude = cached.openai(), cached.anthropic()
    question = [{"role": "user", "content": "Which file holds the router?"}]
    first = oai.chat.completions.create(model="qwen", messages=_turn(question), max_tokens=4, temperature=0)
    again = oai.chat.completions.create(model="qwen", messages=_turn(question), max_tokens=4, temperature=0)
    assert first.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens_details.cached_tokens
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens - 1
    message = claude.messages.create(model="qwen", system=SYSTEM, messages=question, max_tokens=4)
    # Anthropic counts cache reads apart: input_tokens is what was not read from the cache.
    assert message.usage.cache_read_input_tokens > 0
    assert message.usage.input_tokens + message.usage.cache_read_input_tokens == again.usage.prompt_tokens
    with claude.messages.stream(model="qwen", system=SYSTEM, messages=question, max_tokens=4) as stream:
        streamed = stream.get_final_message()
    assert streamed.usage.cache_read_input_tokens == message.usage.cache_read_input_tokens
    response = oai.responses.create(model="qwen", instructions=SYSTEM, input="Which file holds the router?", max_output_tokens=4,
                                    temperature=0)
    assert response.usage.input_tokens_details.cached_tokens > 0


async def _stream(client: httpx.AsyncClient, messages: list[dict], *, stop_after: int | None = None) -> str:
    body = {"model": "qwen", "messages": messages, "max_tokens": 24, "temperature": 0, "logit_bias": EOS_BLOCK, "stream": True}
    parts: list[str] = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                parts.append(json.dumps([delta.get("content"), delta.get("reasoning_content"), delta.get("tool_calls")]))
            if stop_after is not None and len(parts) >= stop_after:
                return "aborted"  # the client goes away mid-stream
    return "".join(parts)


def test_concurrent_sessions_sharing_a_system_prompt_stay_exact(cached, uncached):
    sessions = [_turn([{"role": "user", "content": f"Session {i}: list the files under src/module{i}."}]) for i in range(8)]

    async def together() -> list[str]:
        async with httpx.AsyncClient(base_url=cached.base_url, timeout=120) as client:
            return await asyncio.gather(*(_stream(client, messages, stop_after=3 if i == 5 else None)
                                          for i, messages in enumerate(sessions)))

    async def alone(messages: list[dict]) -> str:
        async with httpx.AsyncClient(base_url=uncached.base_url, timeout=120) as client:
            return await _stream(client, messages)

    results = asyncio.run(together())
    for i, messages in enumerate(sessions):
        if i != 5:
            assert results[i] == asyncio.run(alone(messages)), i
    # The aborted session's next turn, and a repeat of any other, are still exact.
    assert asyncio.run(_alone_on(cached, sessions[5])) == asyncio.run(alone(sessions[5]))


async def _alone_on(server, messages: list[dict]) -> str:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
        return await _stream(client, messages)


def test_status_shows_the_cache(cached, uncached):
    cached.openai().chat.completions.create(model="qwen", messages=_turn([{"role": "user", "content": "hi"}]), max_tokens=2)
    status = httpx.get(cached.base_url + "/admin/status", timeout=10).json()["models"]["qwen"]
    cache = status["prefix_cache"]
    assert status["state"] == "idle" and cache["entries"] > 0 and cache["bytes"] > 0 and 0 < cache["hit_ratio"] < 1
    assert cache["hit_tokens"] <= cache["lookup_tokens"] and cache["budget_bytes"] == 2 * 2**30
    assert httpx.get(uncached.base_url + "/admin/status", timeout=10).json()["models"]["qwen"]["prefix_cache"] is None
    shown = subprocess.run([sys.executable, "-m", "router.cli", "status", "--url", cached.base_url], capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0 and "prefix cache:" in shown.stdout and "hit ratio" in shown.stdout, shown.stderr
