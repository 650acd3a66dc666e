"""A client that goes away frees its place at once: non-streaming, streaming during a long prefill, and mid-answer.

The model has one place (max_concurrency 1, no queue), so a second request answers 200 only
once the first one's place came back; while it is held, the second gets 429. The first request
would hold it for a long time: a 16k-token answer (EOS blocked), or a 24k-token prompt.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.server import wait_for

EOS_BLOCK = {"2": -100}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    model = tiny_models.path("qwen3", hidden_size=256, num_layers=4, max_context=32768)
    return servers.start({"one": {"path": str(model), "max_concurrency": 1, "max_queue": 0, "prefill_step": 512}})


def short(http: httpx.Client) -> int:
    return http.post("/v1/chat/completions", json={"model": "one", "messages": [{"role": "user", "content": "hi"}],
                                                   "max_tokens": 1}).status_code


def status(server) -> dict:
    return server.status()["models"]["one"]


def test_a_non_streaming_client_that_gives_up_frees_its_place(server):
    body = {"model": "one", "messages": [{"role": "user", "content": "count"}], "max_tokens": 16_000, "logit_bias": EOS_BLOCK}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=2.0)
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        wait_for(lambda: status(server).get("running") == 0, timeout_s=20, what="the abandoned request aborted")
        assert short(http) == 200


def test_a_streaming_client_that_leaves_during_prefill_frees_its_place(server):
    prompt = " ".join(f"word{i % 97}" for i in range(5_000))  # about 24k tokens
    body = {"model": "one", "messages": [{"role": "user", "content": prompt}], "max_tokens": 4, "stream": True}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200, response.read()
            wait_for(lambda: status(server).get("running") == 1, timeout_s=20, what="the long prompt prefilling")
            time.sleep(0.5)
        # Closed while it prefills: its place comes back within a prefill chunk, not after the prompt.
        wait_for(lambda: status(server).get("running") == 0, timeout_s=20, what="the abandoned prefill aborted")
        assert short(http) == 200


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "count"}], "stream": True}),
    ("/v1/completions", {"prompt": "count", "stream": True}),
    ("/v1/messages", {"messages": [{"role": "user", "content": "count"}], "stream": True}),
    ("/v1/responses", {"input": "count", "stream": True}),
], ids=["chat", "completions", "messages", "responses"])
def test_a_streaming_client_that_leaves_mid_answer_frees_its_place(server, path, body):
    """The SSE responses have no disconnect listener of their own: CancelOnDisconnect ends them."""
    body = {**body, "model": "one", "max_tokens": 16_000, "logit_bias": EOS_BLOCK}
    if path == "/v1/responses":
        body["max_output_tokens"] = body.pop("max_tokens")
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with http.stream("POST", path, json=body) as response:
            assert response.status_code == 200, response.read()
            frames = 0
            for line in response.iter_lines():
                frames += line.startswith("data:")
                if frames >= 8:
                    break  # well into the answer: tokens are streaming
        wait_for(lambda: status(server).get("running") == 0, timeout_s=20, what="the abandoned stream aborted")
        assert short(http) == 200
