"""HTTP-level limits on a live server: HEAD on GET routes, header and body timeouts (408, then close).

Slow clients are raw sockets, so the bytes on the wire are exactly what the test says. Timeouts are 1s;
every wait allows several seconds of slack, because these machines are slow and noisy.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

TIMEOUT_S = 1.0
SLACK_S = 6.0  # how late past TIMEOUT_S a 408 may arrive and still pass
EOS_BLOCK = {"2": -100}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    path = str(tiny_models.path("qwen3"))
    return servers.start({"qwen": {"path": path}}, server={"header_timeout_s": TIMEOUT_S, "body_timeout_s": TIMEOUT_S})


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def connect(server) -> socket.socket:
    # The socket timeout bounds every wait: without the server's own timeouts, recv fails here.
    return socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT_S + SLACK_S)


def read_response(sock: socket.socket, buffer: bytes = b"") -> tuple[int, dict[str, str], bytes, bytes]:
    """One HTTP/1.1 response with a Content-Length: (status, headers, body, bytes read past it)."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response head: {buffer!r}"
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        rest += chunk
    return int(status_line.split()[1]), headers, rest[:length], rest[length:]


def assert_closed(sock: socket.socket) -> None:
    """The server closes its end: recv reaches EOF (not a timeout) once the response is read."""
    try:
        assert sock.recv(65536) == b""
    except ConnectionResetError:
        pass  # also a close, if unsent client bytes were still in the server's buffer


def assert_timeout_408(sock: socket.socket, started: float, *, anthropic: bool = False, received: bytes = b"") -> None:
    """A 408 in the API's error shape, within the timeout plus slack, and then the server closes."""
    status, headers, body, extra = read_response(sock, received)
    elapsed = time.monotonic() - started
    assert status == 408, body
    assert headers["connection"] == "close"
    assert headers["content-type"].startswith("application/json")
    assert TIMEOUT_S * 0.8 <= elapsed <= TIMEOUT_S + SLACK_S, elapsed
    payload = json.loads(body)
    if anthropic:
        assert set(payload) == {"type", "error"} and payload["type"] == "error"
        assert payload["error"]["type"] == "timeout_error" and payload["error"]["message"]
    else:
        error = payload["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]
        assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", None, "request_timeout")
    assert extra == b""
    assert_closed(sock)


def assert_still_serving(http: httpx.Client) -> None:
    assert http.get("/health").status_code == 200
    reply = http.post("/v1/chat/completions", json={"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert reply.status_code == 200, reply.text


# --- HEAD ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/health", "/ready", "/", "/v1/models", "/v1/models/qwen", "/v1/models/ghost"])
def test_head_answers_like_get_without_a_body(http, path):
    get = http.get(path)
    head = http.head(path)
    assert head.status_code == get.status_code
    assert head.content == b""
    # Same headers, except the clock and the request's own id.
    varying = {"date", "x-request-id"}
    assert {k: v for k, v in head.headers.items() if k not in varying} == {k: v for k, v in get.headers.items() if k not in varying}
    assert head.headers["x-request-id"] != get.headers["x-request-id"]


# --- header timeout ------------------------------------------------------------------------------


def test_silent_connection_gets_408_and_is_closed(server, http):
    with connect(server) as sock:
        started = time.monotonic()
        assert_timeout_408(sock, started)
    assert_still_serving(http)


def test_trickled_headers_get_408_while_still_trickling(server, http):
    """Each byte arriving does not restart the clock: the deadline is for the whole head."""
    with connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(0.25)
        received = b""
        # Trickle a header far longer than the timeout plus slack; the 408 must come mid-trickle.
        while time.monotonic() - started < TIMEOUT_S + SLACK_S and not received:
            try:
                sock.sendall(b"X")
                received = sock.recv(65536)
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        assert received, "no 408 while the headers trickled in"
        sock.settimeout(TIMEOUT_S + SLACK_S)
        assert_timeout_408(sock, started, received=received)
    assert_still_serving(http)


def test_next_request_on_a_keepalive_connection_gets_408(server, http):
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _, extra = read_response(sock)
        assert status == 200 and headers.get("connection") != "close" and extra == b""
        sock.sendall(b"GET /health HTTP/1.1\r\nHo")
        started = time.monotonic()
        assert_timeout_408(sock, started)
    assert_still_serving(http)


def test_idle_keepalive_time_is_not_header_time(server):
    """Between requests only uvicorn's keep-alive timeout (5s) applies; the header clock starts with the next byte."""
    with connect(server) as sock:
        for _ in range(2):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            status, _, body, _ = read_response(sock)
            assert status == 200, body
            time.sleep(TIMEOUT_S * 2.5)


def test_slow_but_complete_headers_in_time_are_served(server):
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        time.sleep(TIMEOUT_S * 0.3)
        sock.sendall(b"Host: x\r\n\r\n")
        status, _, body, _ = read_response(sock)
        assert status == 200 and json.loads(body) == {"status": "ok"}


# --- body timeout --------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "anthropic"), [("/v1/chat/completions", False), ("/v1/messages", True)])
def test_short_body_gets_408_in_the_api_shape(server, http, path, anthropic):
    with connect(server) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        sock.sendall(head.encode() + b'{"model": ')
        started = time.monotonic()
        assert_timeout_408(sock, started, anthropic=anthropic)
    assert_still_serving(http)


def test_body_deadline_does_not_cut_a_long_stream(server):
    """The deadline ends with the body: a stream that outlives it keeps going."""
    body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3000, "logit_bias": EOS_BLOCK, "stream": True}
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            started = time.monotonic()
            frames = 0
            for line in response.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    assert "error" not in json.loads(line.removeprefix("data: ")), line
                    frames += 1
                if time.monotonic() - started > TIMEOUT_S * 2.5:
                    break
            assert time.monotonic() - started > TIMEOUT_S * 2.5, f"stream ended after {frames} frames"
