"""Two live servers on loopback, one the other's upstream: every API proxied, streams passed through.

The back server serves a tiny random-weight model ("tiny") behind a key of its own; the front serves
it as "remote" (`upstream = ...`, `upstream_model = "tiny"`, the back's key from `api_key_env`) behind
different client keys. Greedy, seeded requests make the two servers' outputs comparable frame by frame.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import httpx
import pytest

from tests.support.server import wait_for

BACK_KEY, FRONT_KEY = "back-secret", "front-secret"
EOS_BLOCK = {"2": -100}
# Per-request values two generations of the same text never share; masked before comparing bytes.
_VOLATILE = re.compile(rb'"(id|created|created_at|system_fingerprint)":("[^"]*"|\d+(\.\d+)?)|(chatcmpl|cmpl|resp|msg|rs|fc|call)_?-?[0-9a-f]{8,}')

CHAT = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 12, "temperature": 0, "seed": 7,
        "logit_bias": EOS_BLOCK}
BODIES = {
    "/v1/chat/completions": dict(CHAT, stream=True, stream_options={"include_usage": True}),
    "/v1/completions": {"prompt": "Once upon", "max_tokens": 12, "temperature": 0, "seed": 7, "logit_bias": EOS_BLOCK, "stream": True},
    "/v1/responses": {"input": "hello there", "max_output_tokens": 12, "temperature": 0, "stream": True},
    "/v1/messages": {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 12, "temperature": 0, "stream": True},
}


@pytest.fixture(scope="module")
def back(servers, tiny_models):
    # "leaked" would count any request that arrived with the front's client key: there must be none.
    keys = [{"name": "from-front", "key_env": "BACK_KEY", "admin": True}, {"name": "leaked", "key_env": "LEAKED_KEY", "admin": True}]
    # No prefix cache: the second of two equal requests would report cached tokens the first did not.
    tiny = {"path": str(tiny_models.path("qwen3")), "chat_template_kwargs": {"enable_thinking": False}, "prefix_cache": {"enabled": False}}
    return servers.start({"tiny": tiny},
                         keys=keys, env={"BACK_KEY": BACK_KEY, "LEAKED_KEY": FRONT_KEY}, ready_key=BACK_KEY)


@pytest.fixture(scope="module")
def server(servers, back):
    remote = {"upstream": back.base_url + "/v1", "upstream_model": "tiny", "api_key_env": "UP_KEY", "aliases": ["far-*"]}
    keyless = {"upstream": back.base_url + "/v1", "upstream_model": "tiny"}
    return servers.start({"remote": remote, "keyless": keyless}, keys=[{"name": "client", "key_env": "FRONT_KEY", "admin": True}],
                         env={"UP_KEY": BACK_KEY, "FRONT_KEY": FRONT_KEY}, ready_key=FRONT_KEY)


def sse(base_url: str, path: str, body: dict, key: str) -> tuple[httpx.Response, bytes]:
    with httpx.stream("POST", base_url + path, json=body, headers={"x-api-key": key}, timeout=120) as response:
        return response, response.read()


def masked(stream: bytes) -> bytes:
    return _VOLATILE.sub(b"<v>", stream)


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("path", list(BODIES))
def test_streamed_frames_are_the_upstreams_apart_from_the_model_name(server, back, path):
    direct, direct_bytes = sse(back.base_url, path, {**BODIES[path], "model": "tiny"}, BACK_KEY)
    proxied, proxied_bytes = sse(server.base_url, path, {**BODIES[path], "model": "remote"}, FRONT_KEY)
    assert direct.status_code == proxied.status_code == 200, proxied_bytes[:500]
    assert proxied.headers["content-type"].startswith("text/event-stream")
    assert proxied.headers["x-rapidmlx-served-by"] == "upstream:remote"
    assert b'"model":"tiny"' in direct_bytes and b'"model":"tiny"' not in proxied_bytes
    assert masked(proxied_bytes) == masked(direct_bytes.replace(b'"model":"tiny"', b'"model":"remote"'))


def test_sdks_read_every_api_through_the_front_strictly(server):
    oai, claude = server.openai(FRONT_KEY), server.anthropic(FRONT_KEY)
    chat = oai.chat.completions.create(model="remote", **{k: v for k, v in CHAT.items() if k != "logit_bias"})
    assert chat.model == "remote" and chat.choices[0].message.content
    assert oai.completions.create(model="far-away", prompt="Once upon", max_tokens=8, temperature=0).model == "far-away"
    response = oai.responses.create(model="remote", input="hi", max_output_tokens=8, temperature=0)
    assert response.model == "remote" and response.status in ("completed", "incomplete")
    message = claude.messages.create(model="remote", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert message.model == "remote" and message.content
    with claude.messages.stream(model="remote", max_tokens=8, messages=[{"role": "user", "content": "hi"}]) as stream:
        assert stream.get_final_message().model == "remote"
    chunks = list(oai.chat.completions.create(model="remote", messages=[{"role": "user", "content": "hi"}], max_tokens=8, stream=True))
    assert {chunk.model for chunk in chunks} == {"remote"}
    assert claude.messages.count_tokens(model="remote", messages=[{"role": "user", "content": "hi"}]).input_tokens > 0
    assert oai.models.retrieve("remote").id == "remote"
    assert {"remote", "keyless"} <= {m.id for m in oai.models.list()}


def test_front_keys_are_never_forwarded(server, back):
    before = back.admin("/metrics", headers={"x-api-key": BACK_KEY}).text
    assert sse(server.base_url, "/v1/chat/completions", {**BODIES["/v1/chat/completions"], "model": "remote"}, FRONT_KEY)[0].status_code == 200
    # No api_key_env: the upstream gets no key at all, not the client's, and says so in the client's shape.
    refused = httpx.post(server.base_url + "/v1/messages", headers={"x-api-key": FRONT_KEY}, timeout=60,
                         json={"model": "keyless", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    assert refused.status_code == 401
    assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "authentication_error"
    openai_refused = httpx.post(server.base_url + "/v1/chat/completions", headers={"Authorization": f"Bearer {FRONT_KEY}"},
                                timeout=60, json={"model": "keyless", **CHAT})
    assert openai_refused.status_code == 401 and openai_refused.json()["error"]["code"] == "invalid_api_key"
    after = back.admin("/metrics", headers={"x-api-key": BACK_KEY}).text
    assert metric(after, "rapidmlx_key_requests_total", key_name="leaked") == 0
    assert metric(after, "rapidmlx_key_requests_total", key_name="from-front") > metric(before, "rapidmlx_key_requests_total", key_name="from-front")


def test_upstream_errors_come_back_in_the_clients_shape(server):
    too_long = "word " * 50000
    oai = httpx.post(server.base_url + "/v1/chat/completions", headers={"x-api-key": FRONT_KEY}, timeout=60,
                     json={"model": "remote", "messages": [{"role": "user", "content": too_long}], "max_tokens": 4})
    assert oai.status_code == 400 and oai.json()["error"]["code"] == "context_length_exceeded"
    claude = httpx.post(server.base_url + "/v1/messages", headers={"x-api-key": FRONT_KEY}, timeout=60,
                        json={"model": "remote", "messages": [{"role": "user", "content": too_long}], "max_tokens": 4})
    assert claude.status_code == 400 and claude.json()["type"] == "error"
    assert claude.json()["error"]["message"].startswith("prompt is too long")


def test_a_client_disconnect_frees_the_upstreams_slot(server, back):
    status = lambda: back.status(headers={"x-api-key": BACK_KEY})["models"]["tiny"]  # noqa: E731
    body = dict(CHAT, model="remote", max_tokens=3000, stream=True)
    with httpx.stream("POST", server.base_url + "/v1/chat/completions", json=body, headers={"x-api-key": FRONT_KEY}, timeout=120) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        assert wait_for(lambda: status().get("running") == 1, 30, "the upstream to run the stream")
        assert server.status(headers={"x-api-key": FRONT_KEY})["upstreams"]["remote"]["inflight"] == 1
    wait_for(lambda: status().get("running") == 0 and status()["inflight"] == 0, 30, "the upstream to free the slot")
    assert server.status(headers={"x-api-key": FRONT_KEY})["upstreams"]["remote"]["inflight"] == 0


def test_status_and_metrics_show_each_upstream(server):
    upstream = server.status(headers={"x-api-key": FRONT_KEY})["upstreams"]["remote"]
    assert upstream["state"] == "healthy" and upstream["upstream_model"] == "tiny" and upstream["off_fleet"] is False
    assert upstream["last_check_latency_ms"] is not None and upstream["requests"] > 0
    text = server.admin("/metrics", headers={"x-api-key": FRONT_KEY}).text
    assert metric(text, "rapidmlx_upstream_healthy", model_name="remote") == 1
    assert metric(text, "rapidmlx_upstream_requests_total", model_name="remote", status="200") > 0
    assert metric(text, "rapidmlx_upstream_response_latency_seconds_count", model_name="remote") > 0


def test_an_unreachable_upstream_answers_503_with_retry_after_then_recovers(servers, tiny_models):
    back = servers.start({"tiny": {"path": str(tiny_models.path("qwen3"))}})
    port = back.port
    front = servers.start({"remote": {"upstream": back.base_url + "/v1", "upstream_model": "tiny"}})
    body = {"model": "remote", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert httpx.post(front.base_url + "/v1/chat/completions", json=body, timeout=60).status_code == 200
    back.stop()
    for _ in range(2):  # the first finds it down, the second is refused at once
        down = httpx.post(front.base_url + "/v1/chat/completions", json=body, timeout=60)
        assert down.status_code == 503 and int(down.headers["retry-after"]) >= 1
        assert down.json()["error"]["code"] == "upstream_unreachable"
    claude = httpx.post(front.base_url + "/v1/messages", timeout=60, json={**body, "max_tokens": 2})
    assert claude.status_code == 503 and claude.json()["error"]["type"] == "overloaded_error"
    assert front.status()["upstreams"]["remote"]["state"] == "unreachable"
    started = time.monotonic()
    servers.start({"tiny": {"path": str(tiny_models.path("qwen3"))}}, port=port)
    wait_for(lambda: front.status()["upstreams"]["remote"]["state"] == "healthy", 60, "the front to see the upstream back")
    assert time.monotonic() - started < 60
    assert httpx.post(front.base_url + "/v1/chat/completions", json=body, timeout=60).status_code == 200


def test_many_streams_at_once_all_complete(server):
    results: list[int] = []

    def one() -> None:
        response, data = sse(server.base_url, "/v1/chat/completions", {**BODIES["/v1/chat/completions"], "model": "remote"}, FRONT_KEY)
        results.append(response.status_code if data.endswith(b"data: [DONE]\n\n") else -1)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert results == [200] * 6


def test_an_upstream_that_dies_mid_stream_ends_the_stream_with_the_apis_error_event(servers, tiny_models):
    back = servers.start({"tiny": {"path": str(tiny_models.path("qwen3"))}})
    front = servers.start({"remote": {"upstream": back.base_url + "/v1", "upstream_model": "tiny"}})
    worker = back.worker_pid("tiny")
    body = dict(CHAT, model="remote", max_tokens=3000, stream=True)
    with httpx.stream("POST", front.base_url + "/v1/chat/completions", json=body, timeout=120) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        for pid in (back.process.pid, worker):  # no graceful drain: the connection breaks
            os.kill(pid, signal.SIGKILL)
        back.process.wait(30)
        data = [line for line in lines if line.startswith("data: ")]
    assert data[-1] != "data: [DONE]"
    error = json.loads(data[-1][6:])["error"]
    assert error["code"] == "model_unavailable" and "broke off the stream" in error["message"]
    assert wait_for(lambda: front.status()["upstreams"]["remote"]["state"] == "unreachable", 30, "a check to find it down")
