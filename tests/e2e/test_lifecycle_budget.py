"""Model lifecycle on a live server: the memory budget, loading once, ttl, crash limits, operator actions, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest

from tests.support.server import wait_for

EOS_BLOCK = {"2": -100}


def chat(model: str, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **fields}


def states(live) -> dict[str, str]:
    return {model_id: model["state"] for model_id, model in live.status()["models"].items()}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    qwen3, llama = str(tiny_models.path("qwen3")), str(tiny_models.path("llama"))
    lazy = {"preload": False}
    # memory_gb fixes each model's share, so the budget arithmetic is the test's, not the checkpoint's.
    return servers.start({
        "pinned": {"path": qwen3, "memory_gb": 1.0, "pin": True, "ttl": 1.0, **lazy},
        "x": {"path": llama, "memory_gb": 1.0, **lazy},
        "y": {"path": qwen3, "memory_gb": 1.0, **lazy},
        "z": {"path": llama, "memory_gb": 1.0, **lazy},
        "huge": {"path": qwen3, "memory_gb": 3.0, **lazy},
        "once": {"path": llama, "memory_gb": 0.1, **lazy},
        "short": {"path": qwen3, "memory_gb": 0.1, "ttl": 2.0, **lazy},
    }, server={"memory_budget_gb": 3.3})


def test_the_budget_unloads_the_least_recently_used_idle_model_and_never_a_pinned_one(server):
    http = httpx.Client(base_url=server.base_url, timeout=120)
    for model in ("pinned", "x", "y", "x"):  # y is now the least recently used unpinned model
        assert http.post("/v1/chat/completions", json=chat(model)).status_code == 200
    assert {k: v for k, v in states(server).items() if k in ("pinned", "x", "y")} == {"pinned": "idle", "x": "idle", "y": "idle"}
    assert http.post("/v1/chat/completions", json=chat("z")).status_code == 200  # 4 GB > 3.3: one must go
    now = states(server)
    assert (now["pinned"], now["x"], now["y"], now["z"]) == ("idle", "idle", "unloaded", "idle"), now
    assert "unloading idle y to fit the memory budget" in server.log()

    # 3 GB never fits beside the pinned 1 GB: refused with what holds the memory, nothing unloaded.
    reply = http.post("/v1/chat/completions", json=chat("huge"))
    assert reply.status_code == 503 and reply.headers["retry-after"], reply.text
    message = reply.json()["error"]["message"]
    assert "'huge' needs 3.00 GB" in message and "memory_budget_gb is 3.30 GB" in message, message
    assert "pinned (1.00 GB, pinned)" in message and "x (1.00 GB, idle)" in message, message
    after = states(server)
    assert (after["x"], after["z"], after["huge"]) == ("idle", "idle", "unloaded")
    status = server.status()
    assert status["memory_budget_bytes"] == int(3.3 * 2**30)
    assert status["models"]["x"]["memory"]["total_bytes"] == 2**30


def test_concurrent_first_requests_load_the_model_once(server):
    replies: list[int] = []

    def ask() -> None:
        replies.append(httpx.post(server.base_url + "/v1/chat/completions", json=chat("once"), timeout=120).status_code)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert replies == [200] * 4
    assert server.log().count("model once: starting its worker") == 1


def test_ttl_unloads_an_idle_model_but_not_a_pinned_one(server):
    assert httpx.post(server.base_url + "/v1/chat/completions", json=chat("short"), timeout=120).status_code == 200
    wait_for(lambda: states(server)["short"] == "unloaded", timeout_s=15, what="the ttl unload")
    assert "model short: worker" in server.log() and "idle for 2s (ttl)" in server.log()
    assert states(server)["pinned"] == "idle"  # its ttl of 1 s passed long ago; pinned models stay
    # Unloaded is not failed: the next request loads it again.
    assert httpx.post(server.base_url + "/v1/chat/completions", json=chat("short"), timeout=120).status_code == 200


def test_operators_unload_and_load_models(server):
    http = httpx.Client(base_url=server.base_url, timeout=120)
    assert http.post("/v1/chat/completions", json=chat("x")).status_code == 200
    reply = http.post("/admin/models/x/unload")
    assert reply.status_code == 200 and reply.json()["state"] == "unloaded" and reply.json()["pid"] is None
    reply = http.post("/admin/models/x/load")
    assert reply.status_code == 200 and reply.json()["state"] == "idle" and reply.json()["pid"], reply.text
    missing = http.post("/admin/models/nope/load")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_repeated_crashes_mark_a_model_failed_until_a_reload_or_load_retries(servers, tiny_models):
    live = servers.start({"fragile": {"path": str(tiny_models.path("qwen3"))}}, server={"crash_limit": 2, "crash_window_s": 120})
    http = httpx.Client(base_url=live.base_url, timeout=120)

    def crash_until_failed() -> dict:
        first = live.status()["models"]["fragile"]["pid"]
        os.kill(first, signal.SIGKILL)
        second = wait_for(lambda: (m := live.status()["models"]["fragile"])["state"] == "idle" and m["pid"] != first and m["pid"],
                          what="the restart")
        os.kill(second, signal.SIGKILL)
        return wait_for(lambda: (m := live.status()["models"]["fragile"])["state"] == "failed" and m, what="failed")

    failed = crash_until_failed()
    assert "crashed 2 times" in failed["last_error"], failed
    time.sleep(2)  # no restart loop: it stays failed
    assert live.status()["models"]["fragile"]["state"] == "failed"
    reply = http.post("/v1/chat/completions", json=chat("fragile"))
    assert reply.status_code == 503 and "crashed 2 times" in reply.json()["error"]["message"]

    assert http.post("/admin/reload").status_code == 200  # the file is unchanged: the reload retries it
    wait_for(lambda: live.status()["models"]["fragile"]["state"] == "idle", what="recovery by reload")
    assert http.post("/v1/chat/completions", json=chat("fragile")).status_code == 200

    crash_until_failed()
    reply = http.post("/admin/models/fragile/load")
    assert reply.status_code == 200 and reply.json()["state"] == "idle", reply.text


def test_sigterm_drains_the_stream_in_flight_flushes_the_cache_and_exits_0(servers, tiny_models, tmp_path):
    cache_dir = tmp_path / "prefix-cache"
    live = servers.start({"one": {"path": str(tiny_models.path("qwen3")), "prefix_cache": {"dir": str(cache_dir)}}},
                         server={"drain_timeout_s": 60})
    chunks: list[str] = []
    first = threading.Event()

    def stream() -> None:
        body = chat("one", max_tokens=2000, logit_bias=EOS_BLOCK, stream=True)
        with httpx.stream("POST", live.base_url + "/v1/chat/completions", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    chunks.append(line[6:])
                    first.set()

    thread = threading.Thread(target=stream)
    thread.start()
    assert first.wait(60)
    live.process.send_signal(signal.SIGTERM)
    # New connections are refused while the stream in flight runs to its end.
    wait_for(lambda: _refused(live.base_url), timeout_s=10, what="the listener to close")
    thread.join(120)
    assert chunks[-1] == "[DONE]" and json.loads(chunks[-2])["choices"][0]["finish_reason"] == "length"
    assert live.process.wait(timeout=60) == 0
    assert "prefix cache on disk: flushed" in live.log()
    assert any(cache_dir.rglob("*.safetensors"))  # the prompt and the output, kept for the next start


def _refused(base_url: str) -> bool:
    try:
        httpx.get(base_url + "/health", timeout=2)
    except httpx.TransportError:
        return True
    return False
