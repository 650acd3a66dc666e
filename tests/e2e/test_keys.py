"""Per-key access on a live server: 401/403/429 in each API's shape, limits, live key changes, no secret in logs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time

import anthropic
import httpx
import openai
import pytest

from tests.support.server import wait_for

ALICE, BOB, CAROL, OPS, DAVE, ERIN = "sk-alice-4f1c9e", "sk-bob-77aa02", "sk-carol-1b2c3d", "sk-ops-9e8d7c", "sk-dave-5a6b7c", "sk-erin-2d3e4f"
WRONG = "sk-wrong-000000"
PRIVATE = "the launch codes are zebra-quartz"
EOS_BLOCK = {"2": -100}


def keys(*, with_dave: bool = False, with_alice: bool = True) -> list[dict]:
    entries = [
        {"name": "bob", "key_sha256": hashlib.sha256(BOB.encode()).hexdigest(), "models": ["small"]},
        {"name": "erin", "key_env": "ERIN_KEY", "rpm": 3},
        {"name": "carol", "key_env": "CAROL_KEY", "max_concurrent": 1},
        {"name": "ops", "key_env": "OPS_KEY", "admin": True},
    ]
    if with_alice:
        entries.insert(0, {"name": "alice", "key_env": "ALICE_KEY", "models": ["big", "tiny-*"]})
    if with_dave:
        entries.append({"name": "dave", "key_sha256": hashlib.sha256(DAVE.encode()).hexdigest()})
    return entries


@pytest.fixture(scope="module")
def ready(servers, tiny_models):
    return servers.start(
        {"big": {"path": str(tiny_models.path("qwen3"))}, "small": {"path": str(tiny_models.path("llama")), "aliases": ["tiny-1"]}},
        keys=keys(), env={"ALICE_KEY": ALICE, "CAROL_KEY": CAROL, "OPS_KEY": OPS, "ERIN_KEY": ERIN}, ready_key=OPS,
    )


def chat(model: str, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **fields}


# Every route a client or operator reaches, with a body that would succeed.
ROUTES = [
    ("POST", "/v1/chat/completions", chat("big")),
    ("POST", "/v1/completions", {"model": "big", "prompt": "hi", "max_tokens": 2}),
    ("POST", "/v1/responses", {"model": "big", "input": "hi", "max_output_tokens": 2}),
    ("POST", "/v1/messages", chat("big")),
    ("POST", "/v1/messages/count_tokens", {"model": "big", "messages": [{"role": "user", "content": "hi"}]}),
    ("GET", "/v1/models", None),
    ("GET", "/v1/models/big", None),
    ("GET", "/ready", None),
    ("GET", "/", None),
]


def _get(server, path: str, secret: str | None = None, style: str = "bearer") -> httpx.Response:
    return _call(server, "GET", path, None, secret, style)


def _call(server, method: str, path: str, body: dict | None, secret: str | None, style: str = "bearer") -> httpx.Response:
    headers = {}
    if secret is not None:
        headers = {"authorization": f"Bearer {secret}"} if style == "bearer" else {"x-api-key": secret}
    return httpx.request(method, server.base_url + path, json=body, headers=headers, timeout=120)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_every_route_refuses_a_missing_or_wrong_key_in_its_api_shape(ready, method, path, body):
    for secret in (None, WRONG):
        reply = _call(ready, method, path, body, secret)
        assert reply.status_code == 401, (path, reply.text)
        error = reply.json()
        if path.startswith("/v1/messages"):
            assert error["type"] == "error" and error["error"]["type"] == "authentication_error", error
        else:
            assert error["error"]["code"] == "invalid_api_key" and error["error"]["type"] == "invalid_request_error", error
        assert WRONG not in reply.text


@pytest.mark.parametrize("style", ["bearer", "x-api-key"])
@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_every_route_takes_a_key_in_either_header(ready, method, path, body, style):
    assert _call(ready, method, path, body, ALICE, style).status_code == 200


def test_health_stays_open(ready):
    assert _get(ready, "/health").status_code == 200


def test_the_sdks_see_401_and_403_as_their_own_errors(ready):
    with pytest.raises(openai.AuthenticationError):
        ready.openai(WRONG).chat.completions.create(**chat("big"))
    with pytest.raises(anthropic.AuthenticationError):
        ready.anthropic(WRONG).messages.create(**chat("big"))
    with pytest.raises(openai.PermissionDeniedError):
        ready.openai(ALICE).chat.completions.create(**chat("small"))  # alice: big and tiny-* only
    with pytest.raises(anthropic.PermissionDeniedError):
        ready.anthropic(ALICE).messages.create(**chat("small"))
    assert ready.openai(ALICE).chat.completions.create(**chat("tiny-1")).model == "tiny-1"  # an alias in her list


def test_the_allowlist_limits_models_and_the_model_list(ready):
    # The list holds the ids a key may send; alice reaches small only by its alias tiny-1.
    assert [m["id"] for m in _get(ready, "/v1/models", ALICE).json()["data"]] == ["big"]
    assert [m["id"] for m in _get(ready, "/v1/models", BOB).json()["data"]] == ["small"]
    assert [m["id"] for m in _get(ready, "/v1/models", CAROL).json()["data"]] == ["big", "small"]
    reply = _get(ready, "/v1/models/big", BOB)
    assert reply.status_code == 403 and reply.json()["error"]["type"] == "permission_error"


def test_admin_routes_need_an_admin_key(ready):
    reply = ready.admin(headers={"authorization": f"Bearer {ALICE}"})
    assert reply.status_code == 403 and "admin" in reply.json()["error"]["message"]
    assert ready.admin(headers={"x-api-key": OPS}).status_code == 200
    assert ready.admin(headers={}).status_code == 401


def test_the_cli_sends_an_admin_key(ready):
    def cli(*args: str, env_key: str | None = None):
        env = {**os.environ, "RAPIDMLX_ADMIN_KEY": env_key} if env_key else None
        return subprocess.run([sys.executable, "-m", "router.cli", *args, "--url", ready.base_url], capture_output=True,
                              text=True, timeout=60, env=env)

    refused = cli("status")
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr
    shown = cli("status", "--key", OPS)
    assert shown.returncode == 0 and "big" in shown.stdout, shown.stderr
    assert cli("reload", env_key=OPS).returncode == 0
    assert OPS not in shown.stdout + shown.stderr


def test_rpm_limits_a_key_with_retry_after(ready):
    # erin (rpm 3) is used by this test alone; every request counts, whatever its route.
    replies = [_call(ready, "POST", "/v1/chat/completions", chat("small"), ERIN), _get(ready, "/v1/models", ERIN),
               _call(ready, "POST", "/v1/chat/completions", chat("big"), ERIN),
               _call(ready, "POST", "/v1/chat/completions", chat("big"), ERIN)]
    assert [r.status_code for r in replies[:3]] == [200, 200, 200]
    assert replies[3].status_code == 429 and int(replies[3].headers["retry-after"]) >= 1
    assert "requests per minute" in replies[3].json()["error"]["message"]
    anthropic_reply = _call(ready, "POST", "/v1/messages", chat("small"), ERIN, "x-api-key")
    assert anthropic_reply.status_code == 429 and anthropic_reply.json()["error"]["type"] == "rate_limit_error"


def test_max_concurrent_limits_requests_in_flight(ready):
    started = threading.Event()
    done: dict = {}

    def long_stream() -> None:
        body = chat("big", max_tokens=2000, logit_bias=EOS_BLOCK, stream=True)
        with httpx.stream("POST", ready.base_url + "/v1/chat/completions", json=body, timeout=120,
                          headers={"authorization": f"Bearer {CAROL}"}) as response:
            for _ in response.iter_lines():
                started.set()
        done["ok"] = True

    thread = threading.Thread(target=long_stream)
    thread.start()
    assert started.wait(60)
    second = _call(ready, "POST", "/v1/chat/completions", chat("big"), CAROL)
    assert second.status_code == 429 and second.headers["retry-after"] and "max_concurrent" in second.text
    thread.join(120)
    assert done["ok"] and _call(ready, "POST", "/v1/chat/completions", chat("big"), CAROL).status_code == 200


def test_keys_change_with_a_reload(ready):
    assert _call(ready, "POST", "/v1/chat/completions", chat("big"), DAVE).status_code == 401
    ready.config["keys"] = keys(with_dave=True, with_alice=False)
    ready.write_config()
    wait_for(lambda: _call(ready, "POST", "/v1/chat/completions", chat("big"), DAVE).status_code == 200, what="dave's key")
    assert _call(ready, "POST", "/v1/chat/completions", chat("big"), ALICE).status_code == 401
    last = ready.status(headers={"x-api-key": OPS})["config"]["last_reload"]
    assert last["ok"] and last["key_changes"] == {"alice": "removed", "dave": "added"}, last


def test_every_response_has_a_request_id_that_marks_the_requests_log_lines(ready):
    reply = httpx.post(ready.base_url + "/v1/chat/completions", json=chat("big", messages=[{"role": "user", "content": PRIVATE}]),
                       headers={"authorization": f"Bearer {CAROL}", "x-request-id": "trace-42"}, timeout=120)
    assert reply.status_code == 200 and reply.headers["x-request-id"] == "trace-42"
    made = _get(ready, "/v1/models", CAROL).headers["x-request-id"]
    assert made.startswith("req_") and made != _get(ready, "/v1/models", CAROL).headers["x-request-id"]
    assert _get(ready, "/no-such-route").headers["x-request-id"].startswith("req_")
    assert _get(ready, "/v1/models").headers["x-request-id"].startswith("req_")  # a 401 too
    time.sleep(0.5)
    turn = [line for line in ready.log().splitlines() if "[trace-42]" in line]
    assert any("prompt tokens" in line for line in turn) and any("POST /v1/chat/completions" in line for line in turn), turn
    assert PRIVATE not in ready.log()  # log_content is off


def test_no_secret_reaches_the_log(ready):
    time.sleep(0.5)  # the last requests' log lines are flushed
    log = ready.log()
    assert "POST /v1/chat/completions" in log  # the log saw the traffic
    for secret in (ALICE, BOB, CAROL, OPS, DAVE, ERIN, WRONG):
        assert secret not in log
