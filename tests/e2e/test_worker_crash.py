"""One model's worker dying never takes the other models down; the router restarts it."""

from __future__ import annotations

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
