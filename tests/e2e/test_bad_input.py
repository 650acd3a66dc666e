"""Bad input gets its status and OpenAI's error shape; the server keeps serving."""

from __future__ import annotations

import time

import httpx
import pytest

EOS_BLOCK = {"2": -100}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    path = str(tiny_models.path("qwen3"))
    return servers.start(
        {
            "qwen": {"path": path},
            "short": {"path": path, "max_context": 64},
            # One slot and no queue: a second concurrent request must get 429.
            "single": {"path": path, "max_concurrency": 1, "max_queue": 0},
        },
        server={"max_body_mb": 1},
    )


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def assert_error(response: httpx.Response, status: int, *, code: str | None = None, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    return error


def assert_still_serving(http: httpx.Client) -> None:
    reply = http.post("/v1/chat/completions", json={"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert reply.status_code == 200, reply.text


def chat(model: str, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **fields}


@pytest.mark.parametrize(
    ("payload", "status", "code", "param"),
    [
        (b"{not json", 400, "invalid_value", None),
        (b"", 400, "invalid_value", None),
        (b'{"model": "qwen", "messages": "hi"}', 400, "invalid_value", "messages"),
        (b'{"model": "qwen", "messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}', 400, "invalid_value", "max_tokens"),
        (b'{"model": "qwen", "messages": [{"role": "wizard", "content": "x"}]}', 400, "invalid_value", "messages[0].role"),
        (b'{"model": "qwen", "messages": [{"role": "user", "content": "x"}], "temperature": 9}', 400, "invalid_value", "temperature"),
        (b'{"model": "ghost", "messages": [{"role": "user", "content": "x"}]}', 404, "model_not_found", "model"),
    ],
)
def test_malformed_requests(http, payload, status, code, param):
    response = http.post("/v1/chat/completions", content=payload, headers={"content-type": "application/json"})
    assert_error(response, status, code=code, param=param)
    assert_still_serving(http)


def test_negative_max_tokens(http):
    assert_error(http.post("/v1/chat/completions", json=chat("qwen", max_tokens=-5)), 400, param="max_tokens")
    assert_error(http.post("/v1/completions", json={"model": "qwen", "prompt": "x", "max_tokens": 0}), 400, param="max_tokens")
    assert_still_serving(http)


def test_oversized_body_is_413(http):
    huge = chat("qwen")
    huge["messages"][0]["content"] = "x" * (1024 * 1024 + 10)
    assert_error(http.post("/v1/chat/completions", json=huge), 413)
    assert_still_serving(http)


def test_prompt_over_the_context(http):
    long = {"model": "short", "messages": [{"role": "user", "content": "hello world " * 100}]}
    error = assert_error(http.post("/v1/chat/completions", json=long), 400, code="context_length_exceeded", param="messages")
    assert "maximum context length is 64 tokens" in error["message"]
    assert_error(http.post("/v1/completions", json={"model": "short", "prompt": "hello " * 100}), 400, code="context_length_exceeded")
    assert_still_serving(http)


def test_unknown_route_is_json_404(http):
    assert_error(http.get("/v1/nothing-here"), 404)


def test_queue_full_is_429_with_retry_after(server, http):
    with httpx.Client(base_url=server.base_url, timeout=60) as other:
        with other.stream("POST", "/v1/chat/completions", json=chat("single", max_tokens=3000, logit_bias=EOS_BLOCK, stream=True)) as running:
            lines = running.iter_lines()  # keep a reference: a collected iterator closes the response
            next(lines)  # the first request now holds the only slot
            response = http.post("/v1/chat/completions", json=chat("single", max_tokens=2))
            assert_error(response, 429, code="rate_limit_exceeded")
            assert int(response.headers["retry-after"]) >= 1


def test_client_disconnect_mid_stream_frees_the_slot(server, http):
    for _ in range(3):
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            with client.stream("POST", "/v1/chat/completions", json=chat("single", max_tokens=3000, logit_bias=EOS_BLOCK, stream=True)) as response:
                lines = response.iter_lines()
                for _ in range(5):
                    next(lines)
        # The connection is gone; within a few engine steps the slot must be free again,
        # long before the abandoned 3000-token request could have finished on its own.
        deadline = time.monotonic() + 10
        while True:
            reply = http.post("/v1/chat/completions", json=chat("single", max_tokens=2))
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert reply.status_code == 200, reply.text
    assert "Traceback" not in server.log()
