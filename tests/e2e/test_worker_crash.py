"""One model's worker dying never takes the other models down; the router restarts it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import httpx
import pytest

EOS_BLOCK = {"2": -100}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    return servers.start({
        "victim": {"path": str(tiny_models.path("qwen3"))},
        "bystander": {"path": str(tiny_models.path("llama"))},
    })


def chat(model: str, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **fields}


def test_sigkilled_worker_fails_its_requests_and_restarts(server):
    http = httpx.Client(base_url=server.base_url, timeout=60)
    old_pid = server.worker_pid("victim")
    in_flight: dict = {}

    def long_request() -> None:
        in_flight["response"] = http.post("/v1/chat/completions", json=chat("victim", max_tokens=3500, logit_bias=EOS_BLOCK))

    thread = threading.Thread(target=long_request)
    thread.start()
    time.sleep(1.0)  # the request is decoding now
    os.kill(old_pid, signal.SIGKILL)
    thread.join(timeout=30)

    response = in_flight["response"]
    assert response.status_code == 503, response.text
    assert response.json()["error"]["type"] == "server_error" and "retry-after" in response.headers

    # The other model answers throughout the restart, and the victim comes back.
    deadline = time.monotonic() + 90
    victim_status = None
    while time.monotonic() < deadline:
        assert http.post("/v1/chat/completions", json=chat("bystander")).status_code == 200
        victim = http.post("/v1/chat/completions", json=chat("victim"))
        victim_status = victim.status_code
        if victim_status == 200:
            break
        assert victim_status == 503 and victim.headers.get("retry-after"), victim.text
        time.sleep(0.2)
    assert victim_status == 200
    assert server.worker_pid("victim") != old_pid
    assert http.get("/ready").status_code == 200


def test_a_crash_mid_stream_ends_each_api_stream_with_its_error_event(server):
    """Chat, Messages and Responses streams each end with their own terminal error frame."""
    import json

    http = httpx.Client(base_url=server.base_url, timeout=60)
    victim = "victim"
    requests = {
        "chat": ("/v1/chat/completions", chat(victim, max_tokens=3500, logit_bias=EOS_BLOCK, stream=True)),
        "messages": ("/v1/messages", {"model": victim, "max_tokens": 3500, "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
        "responses": ("/v1/responses", {"model": victim, "max_output_tokens": 3500, "stream": True, "input": "hi"}),
    }
    wait_until_serving(http, victim)
    with contextlib.ExitStack() as stack:
        streams = {name: stack.enter_context(http.stream("POST", path, json=body)) for name, (path, body) in requests.items()}
        lines = {name: stream.iter_lines() for name, stream in streams.items()}
        for name in streams:
            for _ in range(4):
                next(lines[name])  # every stream is producing tokens
        os.kill(server.worker_pid(victim), signal.SIGKILL)
        tails = {name: [line for line in lines[name] if line.startswith("data: ")] for name in streams}

    chat_error = json.loads(tails["chat"][-1][6:])
    assert chat_error["error"]["type"] == "server_error" and "[DONE]" not in tails["chat"][-1]
    messages_error = json.loads(tails["messages"][-1][6:])
    assert messages_error == {"type": "error", "error": {"type": "overloaded_error", "message": messages_error["error"]["message"]}}
    failed = json.loads(tails["responses"][-1][6:])
    assert failed["type"] == "response.failed" and failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"]
    wait_until_serving(http, victim)


def wait_until_serving(http: httpx.Client, model: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if http.post("/v1/chat/completions", json=chat(model)).status_code == 200:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{model} did not come back")
