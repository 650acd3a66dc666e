"""The admin routes answer only to clients on loopback, with an OpenAI-shaped 403 for the rest.

The real app under Litestar's TestClient. Its transport always reports the client as
("testclient", 50000) and offers no option to change it, so a loopback client is made by a
pass-through ASGI wrapper that rewrites only ``scope["client"]``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from litestar.connection import ASGIConnection
from litestar.testing import TestClient

from router.app import create_app
from router.ops.admin import AdminOnlyError, loopback_only
from router.ops.config import load_config_text


def make_app(tmp_path: Path, checkpoint: Path):
    config = load_config_text(f'[models.m]\npath = "{checkpoint}"\npreload = false\n', env={})
    return create_app(config, runtime_dir=tmp_path / "run")


def as_client(app, host: str):
    """The same app, seen from ``host``."""

    async def with_client(scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            scope = {**scope, "client": (host, 43210)}
        await app(scope, receive, send)

    return with_client


@pytest.fixture
def checkpoint(tiny_models) -> Path:
    return tiny_models.path("qwen3")


def assert_forbidden(response) -> None:
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["type"] == "permission_error"
    assert error["code"] == "admin_only"
    assert "loopback" in error["message"]
    assert set(error) >= {"message", "type", "param", "code"}


def test_a_client_off_loopback_gets_403_from_every_admin_route(tmp_path, checkpoint):
    with TestClient(make_app(tmp_path, checkpoint)) as client:
        assert_forbidden(client.get("/admin/status"))
        assert_forbidden(client.post("/admin/reload"))
        assert_forbidden(client.post("/admin/models/m/load"))
        assert_forbidden(client.post("/admin/models/m/unload"))
        # Not a blanket refusal: the public API still answers that client.
        assert client.get("/v1/models").status_code == 200


@pytest.mark.parametrize("host", ["10.0.0.5", "192.168.1.20", "::ffff:10.0.0.5"])
def test_a_lan_client_gets_403(tmp_path, checkpoint, host):
    with TestClient(as_client(make_app(tmp_path, checkpoint), host)) as client:
        assert_forbidden(client.get("/admin/status"))


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_loopback_client_gets_the_status(tmp_path, checkpoint, host):
    with TestClient(as_client(make_app(tmp_path, checkpoint), host)) as client:
        response = client.get("/admin/status")
        assert response.status_code == 200
        body = response.json()
        assert body["config"]["path"] is None and body["config"]["version"] == 1
        assert body["models"]["m"]["state"] == "unloaded"
        # Started without a config file: a reload is refused as invalid, not forbidden.
        reload = client.post("/admin/reload")
        assert reload.status_code == 400
        assert "no config file" in reload.json()["error"]["message"]


_KEYLESS_APP = create_app(load_config_text('[models.m]\npath = "org/unused"\npreload = false\n', env={}),
                          runtime_dir=Path("/nonexistent/never-started"))


def connection(client) -> ASGIConnection:
    scope = {"type": "http", "path": "/admin/status", "raw_path": b"/admin/status", "root_path": "", "scheme": "http",
             "query_string": b"", "headers": [], "method": "GET", "http_version": "1.1", "server": ("127.0.0.1", 8000),
             "client": client, "state": {}, "path_params": {}, "litestar_app": _KEYLESS_APP}
    return ASGIConnection(scope)


@pytest.mark.parametrize("client", [("127.0.0.1", 1), ("127.8.9.10", 1), ("::1", 1)])
def test_the_guard_lets_loopback_addresses_through(client):
    assert loopback_only(connection(client), None) is None


@pytest.mark.parametrize("client", [("10.0.0.5", 1), ("testclient", 1), ("localhost", 1), ("0.0.0.0", 1), ("", 1), None])
def test_the_guard_refuses_other_addresses_and_names(client):
    # A name is not an address: only the socket's peer address proves the client is local.
    with pytest.raises(AdminOnlyError):
        loopback_only(connection(client), None)
