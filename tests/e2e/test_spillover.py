"""Spillover from a local model to an upstream, and `local_only` held at validate and at reload.

The helper server is a second live rapid-mlx on loopback; the front's local model "coder" has room for
two requests (max_concurrency 1 + max_queue 1) and spills the rest to it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import tomli_w

from tests.support.server import wait_for

EOS_BLOCK = {"2": -100}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def helper(servers, tiny_models):
    return servers.start({"helper-model": {"path": str(tiny_models.path("qwen3")), "max_concurrency": 8}})


@pytest.fixture(scope="module")
def server(servers, tiny_models, helper):
    tiny = str(tiny_models.path("qwen3"))
    small = {"path": tiny, "max_concurrency": 1, "max_queue": 1}
    return servers.start({
        "coder": {**small, "spillover": ["helper"]},
        "solo": small,  # the same room and no spillover: the burst's 429s without it
        "balanced": {"path": tiny, "max_concurrency": 4, "spillover": ["helper"], "spillover_when": "least_loaded"},
        "broken": {"path": "/nonexistent/checkpoint", "spillover": ["helper"], "spillover_when": "unavailable"},
        "broken-strict": {"path": "/nonexistent/checkpoint", "spillover": ["helper"]},
        "helper": {"upstream": helper.base_url + "/v1", "upstream_model": "helper-model"},
    }, server={"local_only": True}, wait=False)


def states(server) -> dict[str, str]:
    try:
        return {model_id: model["state"] for model_id, model in server.status()["models"].items()}
    except httpx.TransportError:
        return {}  # not listening yet


def ready(server) -> None:
    wait_for(lambda: all(states(server).get(m) in ("idle", "loaded") for m in ("coder", "solo", "balanced")),
             120, "the local models to load")
    wait_for(lambda: server.status()["models"]["broken"]["state"] == "failed", 60, "the broken model to fail")


def burst(base_url: str, model: str, count: int) -> list[httpx.Response]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 48, "temperature": 0,
            "logit_bias": EOS_BLOCK}
    results: list[httpx.Response] = []
    barrier = threading.Barrier(count)

    def one() -> None:
        barrier.wait()
        results.append(httpx.post(base_url + "/v1/chat/completions", json=body, timeout=120))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    return results


def spilled(server, model: str, reason: str) -> float:
    for line in server.admin("/metrics").text.splitlines():
        if line.startswith("rapidmlx_spillover_requests_total{") and f'model_name="{model}"' in line and f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_burst_beyond_the_local_room_completes_part_upstream(server):
    ready(server)
    without = burst(server.base_url, "solo", 8)
    assert sorted({r.status_code for r in without}) == [200, 429], "the burst must exceed the local room"
    before = spilled(server, "coder", "queue_full")
    results = burst(server.base_url, "coder", 8)
    assert [r.status_code for r in results] == [200] * 8, [r.text[:200] for r in results if r.status_code != 200]
    assert {r.json()["model"] for r in results} == {"coder"}
    where = [r.headers["x-rapidmlx-served-by"] for r in results]
    upstream = where.count("upstream:helper")
    assert upstream >= 1 and where.count("local") >= 1 and upstream + where.count("local") == 8
    assert spilled(server, "coder", "queue_full") - before == upstream


def test_unavailable_spills_while_the_model_has_failed(server):
    ready(server)
    body = {"model": "broken", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    served = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60)
    assert served.status_code == 200 and served.headers["x-rapidmlx-served-by"] == "upstream:helper"
    assert served.json()["model"] == "broken"
    assert spilled(server, "broken", "unavailable") >= 1
    strict = httpx.post(server.base_url + "/v1/chat/completions", json={**body, "model": "broken-strict"}, timeout=60)
    assert strict.status_code == 503, "queue_full spills only a full queue, not a failed model"


def test_least_loaded_sends_to_the_upstream_while_the_local_model_is_busier(server, helper):
    ready(server)
    body = {"model": "balanced", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    idle = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60)
    assert idle.headers["x-rapidmlx-served-by"] == "local", "a tie stays local"
    long = dict(body, max_tokens=3000, logit_bias=EOS_BLOCK, stream=True)
    with httpx.stream("POST", server.base_url + "/v1/chat/completions", json=long, timeout=120) as held:
        assert held.headers["x-rapidmlx-served-by"] == "local"
        lines = held.iter_lines()  # kept: a discarded line iterator closes the response
        assert next(lines).startswith("data: ")
        assert server.status()["models"]["balanced"]["inflight"] == 1
        busy = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60)
        assert busy.status_code == 200 and busy.headers["x-rapidmlx-served-by"] == "upstream:helper"
    assert spilled(server, "balanced", "least_loaded") >= 1


def write(path: Path, config: dict) -> Path:
    path.write_text(tomli_w.dumps(config))
    return path


def validate(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "router.cli", "validate", str(path), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_local_only_rejects_a_cloud_upstream_at_validate(tmp_path, helper):
    cloud = {"upstream": "https://api.openai.com/v1", "upstream_model": "gpt-4.1"}
    done = validate(write(tmp_path / "a.toml", {"server": {"local_only": True}, "models": {"gpt": cloud}}))
    assert done.returncode == 1
    assert done.stderr.startswith('models.gpt.upstream: "https://api.openai.com/v1" is off the fleet (api.openai.com is not')
    assert "server.local_only is true" in done.stderr
    near = {"upstream": helper.base_url + "/v1", "cloud": True}
    local = {"path": "/models/x", "spillover": ["near"], "local_only": True}
    done = validate(write(tmp_path / "b.toml", {"models": {"coder": local, "near": near}}))
    assert done.returncode == 1
    assert done.stderr.strip() == 'models.coder.spillover[0]: "near" is off the fleet (cloud = true) and models.coder.local_only is true'
    assert validate(write(tmp_path / "c.toml", {"models": {"gpt": cloud}})).returncode == 0, "without local_only a cloud upstream is fine"


def test_validate_probe_reports_each_upstream(tmp_path, helper):
    models = {"near": {"upstream": helper.base_url + "/v1", "upstream_model": "helper-model"},
              "gone": {"upstream": "http://127.0.0.1:9/v1"}}
    done = validate(write(tmp_path / "p.toml", {"models": models}), "--probe")
    assert done.returncode == 1, done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].endswith("ok (0 local models, 2 upstream models)")
    assert lines[1].startswith(f"models.near.upstream {helper.base_url}/v1: reachable, 200 in ") and lines[1].endswith("lists 'helper-model'")
    assert lines[2].startswith("models.gone.upstream http://127.0.0.1:9/v1: unreachable (ConnectError")
    assert validate(write(tmp_path / "q.toml", {"models": {"near": models["near"]}}), "--probe").returncode == 0


def test_local_only_rejects_a_cloud_upstream_at_reload(server):
    ready(server)
    config = server.config
    good = dict(config["models"])
    config["models"] = {**good, "gpt": {"upstream": "https://api.openai.com/v1"}}
    server.config_path.write_text(tomli_w.dumps(config))
    reply = server.admin("/admin/reload", method="POST")
    assert reply.status_code == 400
    assert any(line.startswith('models.gpt.upstream: "https://api.openai.com/v1" is off the fleet') for line in reply.json()["errors"])
    status = server.status()
    assert status["config"]["last_reload"]["ok"] is False and "gpt" not in status["upstreams"]
    # The last good config keeps serving, its upstream included.
    body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60).status_code == 200
    config["models"] = good
    server.config_path.write_text(tomli_w.dumps(config))
    assert server.admin("/admin/reload", method="POST").status_code == 200
