"""Continuous batching seen from outside: concurrent streams interleave, outputs stay exact."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

EOS_BLOCK = {"2": -100}
CONCURRENCY = 8
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    return servers.start({"qwen": {"path": str(tiny_models.path("qwen3")), "max_concurrency": CONCURRENCY}})


def body(i: int) -> dict:
    return {
        "model": "qwen", "messages": [{"role": "user", "content": f"request number {i} " * (i + 1)}],
        "max_tokens": MAX_TOKENS, "temperature": 0, "logit_bias": EOS_BLOCK, "stream": True,
    }


async def stream_one(client: httpx.AsyncClient, i: int, started: float) -> dict:
    """Stream one request; record when its first content and its end arrived."""
    first_token_at, text = None, []
    async with client.stream("POST", "/v1/chat/completions", json=body(i)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0]["delta"]
            if delta.get("content"):
                first_token_at = first_token_at or time.monotonic() - started
                text.append(delta["content"])
    return {"first": first_token_at, "end": time.monotonic() - started, "text": "".join(text)}


async def run_concurrently(base_url: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        started = time.monotonic()
        tasks = []
        for i in range(CONCURRENCY):
            tasks.append(asyncio.create_task(stream_one(client, i, started)))
            await asyncio.sleep(0.01)  # submission order defines "first" and "last"
        return await asyncio.gather(*tasks)


async def run_alone(base_url: str, i: int) -> str:
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        return (await stream_one(client, i, time.monotonic()))["text"]


def test_concurrent_streams_interleave_and_match_solo_outputs(server):
    results = asyncio.run(run_concurrently(server.base_url))
    # The last request started producing tokens while the first was still decoding:
    # it joined the running batch instead of waiting for it to drain.
    assert results[-1]["first"] < results[0]["end"], results
    for i, result in enumerate(results):
        assert result["text"] == asyncio.run(run_alone(server.base_url, i)), f"request {i} differs when batched"
