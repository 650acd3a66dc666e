"""Browsers get CORS only for the allowlisted origins; an open endpoint bound beyond loopback says so."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    return servers.start({"m": {"path": str(tiny_models.path("qwen3"))}},
                         server={"host": "0.0.0.0", "cors_origins": ["http://localhost:3000"]})


def preflight(server, origin: str) -> httpx.Response:
    return httpx.options(server.base_url + "/v1/chat/completions", timeout=30, headers={
        "origin": origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type"})


def test_an_allowlisted_origin_gets_cors_headers(server):
    reply = preflight(server, "http://localhost:3000")
    assert reply.status_code in (200, 204) and reply.headers["access-control-allow-origin"] == "http://localhost:3000"
    answer = httpx.post(server.base_url + "/v1/chat/completions", headers={"origin": "http://localhost:3000"}, timeout=60,
                        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_other_origins_get_none(server):
    reply = preflight(server, "http://evil.example")
    assert "access-control-allow-origin" not in reply.headers
    answer = httpx.post(server.base_url + "/v1/chat/completions", headers={"origin": "http://evil.example"}, timeout=60,
                        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert "access-control-allow-origin" not in answer.headers


def test_an_open_endpoint_bound_beyond_loopback_warns(server):
    assert "no [[keys]] configured and bound to 0.0.0.0" in server.log()
