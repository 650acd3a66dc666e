"""Lazy loading and broken models: the rest of the config keeps serving."""

from __future__ import annotations

import shutil
import time

import httpx
import pytest


@pytest.fixture(scope="module")
def server(servers, tiny_models, tmp_path_factory):
    empty = tmp_path_factory.mktemp("not-a-model")
    corrupt = tmp_path_factory.mktemp("corrupt") / "model"
    shutil.copytree(tiny_models.path("qwen3"), corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not safetensors")  # tokenizer loads, weights do not
    return servers.start({
        "eager": {"path": str(tiny_models.path("qwen3"))},
        "lazy": {"path": str(tiny_models.path("llama")), "preload": False},
        "broken": {"path": str(empty), "preload": False},
        "missing": {"path": "acme/not-in-the-cache", "preload": False},
        "corrupt": {"path": str(corrupt), "preload": False},
    })


def chat(model: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_lazy_model_loads_on_first_request(server):
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        states = http.get("/ready").json()["models"]
        assert states["eager"] == "idle" and states["lazy"] == "unloaded"
        assert http.post("/v1/chat/completions", json=chat("lazy")).status_code == 200
        assert http.get("/ready").json()["models"]["lazy"] == "idle"


@pytest.mark.parametrize(("model", "reason"), [("broken", "no config.json"), ("missing", "offline = true"), ("corrupt", "failed to load model")])
def test_unloadable_models_answer_503_with_the_reason(server, model, reason):
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        for _ in range(2):  # the failure is remembered, not retried on every request
            response = http.post("/v1/chat/completions", json=chat(model))
            assert response.status_code == 503 and response.headers["retry-after"]
            assert reason in response.json()["error"]["message"]
        assert http.post("/v1/chat/completions", json=chat("eager")).status_code == 200
        assert http.get("/ready").status_code == 200  # only preloaded models decide readiness


def test_sigterm_stops_the_router_and_its_workers(servers, tiny_models):
    import os
    import signal

    live = servers.start({"one": {"path": str(tiny_models.path("qwen3"))}})
    worker = live.worker_pid("one")
    live.process.send_signal(signal.SIGTERM)
    # A graceful stop is a clean exit for a service manager.
    status = live.process.wait(timeout=30)
    assert status == 0, live.log()[-4000:]
    assert "Application shutdown complete" in live.log()
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # the pool stopped the worker during the shutdown
            os.kill(worker, 0)
            time.sleep(0.1)
