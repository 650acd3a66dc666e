"""``[models.<id>.kv_cache]`` through a live server: concurrent streams on a quantized cache, and
on a windowed one, equal the same requests alone, the status call shows the KV memory and the
window, and a setting the model cannot take fails that model's start with the setting named,
while the others serve."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

pytestmark = pytest.mark.slow

EOS_BLOCK = {"2": -100}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    qwen = str(tiny_models.path("qwen3"))  # head dimension 32
    return servers.start({
        "q8": {"path": qwen, "max_concurrency": 8, "kv_cache": {"bits": 8, "group_size": 32, "quantize_after": 24}},
        "plain": {"path": qwen},
        "misfit": {"path": qwen, "preload": False, "kv_cache": {"bits": 4, "group_size": 64}},
        "windowed": {"path": qwen, "max_concurrency": 8, "kv_cache": {"window": 64}},
        "sliding-misfit": {"path": str(tiny_models.path("llama", sliding_window=32)), "preload": False,
                           "kv_cache": {"window": 64}},
    })


async def _text(client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int = 24) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0,
            "logit_bias": EOS_BLOCK, "stream": True}
    parts = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                parts += [choice["delta"].get("content") or "" for choice in json.loads(line[6:])["choices"]]
    return "".join(parts)


def test_concurrent_streams_on_a_quantized_cache_equal_each_alone(server):
    prompts = [f"Session {i}: " + "list the files under src and explain each one " * (1 + i) for i in range(8)]

    async def together(model: str) -> list[str]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            return await asyncio.gather(*(_text(client, model, p) for p in prompts))

    async def alone(model: str) -> list[str]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            return [await _text(client, model, p) for p in prompts]

    for model in ("q8", "windowed"):
        batched = asyncio.run(together(model))
        assert batched == asyncio.run(alone(model)), model
        # The cache really is quantized, or windowed (the prompts run past 64 tokens): outputs drift.
        assert batched != asyncio.run(alone("plain")), model


def test_status_shows_kv_memory(server):
    async def busy() -> dict:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            streams = [asyncio.create_task(_text(client, "q8", "describe the repository layout " * 6, 400)) for _ in range(4)]
            for _ in range(200):  # until the sequences are in the engine
                status = (await client.get("/admin/status")).json()["models"]
                if status["q8"].get("running"):
                    break
                await asyncio.sleep(0.05)
            await asyncio.gather(*streams)
            return status

    status = asyncio.run(busy())
    kv = status["q8"]["kv_cache"]
    assert kv["bits"] == 8 and 0 < kv["quantized_bytes"] <= kv["bytes"]
    assert status["plain"]["kv_cache"]["bits"] == 0 and status["plain"]["kv_cache"]["quantized_bytes"] == 0
    assert (status["windowed"]["kv_cache"]["window"], status["plain"]["kv_cache"]["window"]) == (64, 0)


def test_a_group_size_the_model_cannot_take_fails_that_model_with_the_setting_named(server):
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        response = http.post("/v1/chat/completions", json={"model": "misfit", "messages": [{"role": "user", "content": "hi"}],
                                                           "max_tokens": 2})
        assert response.status_code == 503
        message = response.json()["error"]["message"]
        assert "models.misfit.kv_cache.group_size = 64 does not divide the model's attention head dimension 32" in message
        assert http.post("/v1/chat/completions", json={"model": "q8", "messages": [{"role": "user", "content": "hi"}],
                                                       "max_tokens": 2}).status_code == 200


def test_a_window_on_a_model_with_its_own_sliding_layers_fails_that_model_with_the_setting_named(server):
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        response = http.post("/v1/chat/completions", json={"model": "sliding-misfit", "max_tokens": 2,
                                                           "messages": [{"role": "user", "content": "hi"}]})
        assert response.status_code == 503
        assert "models.sliding-misfit.kv_cache.window: this model makes its own caches" in response.json()["error"]["message"]
        assert http.post("/v1/chat/completions", json={"model": "windowed", "messages": [{"role": "user", "content": "hi"}],
                                                       "max_tokens": 2}).status_code == 200
