"""Nothing on the host can hijack a worker or cross-wire two routers: a private runtime dir,
socket names unique per router, and a token both sides of a worker connection must show."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import msgspec
import pytest
import tomli_w

from engines.protocol import FRAME_HEADER, PROTOCOL_VERSION, SPEC_ENV, RouterWelcome, WorkerHello, WorkerSpec, decode_output, encode_frame


def chat(model: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_two_routers_on_one_runtime_dir_never_meet(servers, tiny_models, tmp_path):
    """Same runtime dir, same model id: each router gets its own worker, and stopping one
    neither takes the other's model down nor removes its socket."""
    shared = tmp_path / "shared-run"
    path = str(tiny_models.path("qwen3"))
    first = servers.start({"m": {"path": path}}, server={"runtime_dir": str(shared)})
    second = servers.start({"m": {"path": path}}, server={"runtime_dir": str(shared)})
    assert first.worker_pid("m") != second.worker_pid("m")
    sockets = sorted(p.name for p in shared.glob("*.sock"))
    assert len(sockets) == 2, sockets
    for live in (first, second):
        assert httpx.post(live.base_url + "/v1/chat/completions", json=chat("m"), timeout=60).status_code == 200
    first.stop()
    assert len(list(shared.glob("*.sock"))) == 1
    assert httpx.post(second.base_url + "/v1/chat/completions", json=chat("m"), timeout=60).status_code == 200
    assert httpx.get(second.base_url + "/ready", timeout=10).status_code == 200


def test_a_connection_that_is_not_our_worker_is_closed(servers, tiny_models):
    """Whatever reaches a worker socket without this router's token (another router's worker,
    a stray client) is closed; the real worker keeps serving."""
    live = servers.start({"m": {"path": str(tiny_models.path("qwen3"))}})
    (socket_path,) = live.runtime_dir.glob("*.sock")
    for first_frame in (encode_frame(WorkerHello(PROTOCOL_VERSION, "not-the-token", os.getpid())), b"\x00\x00\x00\x05hello"):
        with socket.socket(socket.AF_UNIX) as intruder:
            intruder.settimeout(20)
            intruder.connect(str(socket_path))
            intruder.sendall(first_frame)
            assert intruder.recv(1024) == b""  # closed, no welcome
    assert httpx.post(live.base_url + "/v1/chat/completions", json=chat("m"), timeout=60).status_code == 200
    assert "closed a connection that is not this router's worker" in live.log()


def listen(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(60)
    return listener


def start_worker(spec: WorkerSpec) -> subprocess.Popen:
    env = {**os.environ, SPEC_ENV: msgspec.json.encode(spec).decode()}
    return subprocess.Popen([sys.executable, "-m", "engines.worker", "--model-id", spec.model_id], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def read_frame(conn: socket.socket):
    header = conn.recv(FRAME_HEADER.size, socket.MSG_WAITALL)
    (size,) = FRAME_HEADER.unpack(header)
    return decode_output(conn.recv(size, socket.MSG_WAITALL))


@pytest.mark.parametrize("answer", ["wrong token", "close"])
def test_a_worker_leaves_a_listener_that_is_not_its_router(tiny_models, tmp_path, answer):
    """The worker says hello with its token and waits for the same token back; a listener put
    in its router's place (or another router's) gets nothing more, and the worker exits."""
    socket_path = tmp_path / "w.sock"
    token = secrets.token_hex(16)
    spec = WorkerSpec(model_id="m", model_path=str(tiny_models.path("qwen3")), socket_path=str(socket_path),
                      token=token, max_concurrency=2, prefill_step=64, max_context=512)
    with listen(socket_path) as listener:
        worker = start_worker(spec)
        conn, _ = listener.accept()
        with conn:
            hello = read_frame(conn)
            assert isinstance(hello, WorkerHello) and hello.token == token and hello.pid == worker.pid
            if answer == "wrong token":
                conn.sendall(encode_frame(RouterWelcome("someone else's")))
            else:
                conn.shutdown(socket.SHUT_RDWR)
            assert conn.recv(1024) == b""  # the worker hung up without loading or sending anything
    assert worker.wait(timeout=60) == 3
    assert b"is not the router that started this worker" in worker.stderr.read()


def test_the_token_is_not_on_the_command_line(servers, tiny_models):
    """Any local user can read a command line; the spec (with its token) travels in the environment."""
    live = servers.start({"m": {"path": str(tiny_models.path("qwen3"))}})
    cmdline = Path(f"/proc/{live.worker_pid('m')}/cmdline").read_bytes()
    assert b"token" not in cmdline and b"socket_path" not in cmdline


def serve_with_runtime_dir(tmp_path: Path, runtime_dir: Path, model_path: str) -> subprocess.CompletedProcess:
    config = tmp_path / "rapidmlx.toml"
    config.write_text(tomli_w.dumps({"server": {"port": 0, "runtime_dir": str(runtime_dir), "offline": True},
                                     "models": {"m": {"path": model_path}}}))
    return subprocess.run([sys.executable, "-m", "router.cli", "serve", "--config", str(config)],
                          capture_output=True, text=True, timeout=120)


def test_serve_refuses_a_runtime_dir_open_to_others(tiny_models, tmp_path):
    """Defect 10: a 0777 runtime dir kept its mode with the worker sockets inside."""
    runtime_dir = tmp_path / "run"
    runtime_dir.mkdir()
    runtime_dir.chmod(0o777)
    result = serve_with_runtime_dir(tmp_path, runtime_dir, str(tiny_models.path("qwen3")))
    assert result.returncode == 1
    assert "mode 0777" in result.stderr and "chmod 700" in result.stderr and "Traceback" not in result.stderr


def test_serve_refuses_a_runtime_dir_of_another_user(tiny_models, tmp_path):
    """The default <tempdir>/rapid-mlx-<uid> is a name any local user can create first."""
    if os.geteuid() == 0:
        runtime_dir = tmp_path / "run"
        runtime_dir.mkdir(mode=0o700)
        os.chown(runtime_dir, 65534, 65534)
    else:
        runtime_dir = Path("/")
    result = serve_with_runtime_dir(tmp_path, runtime_dir, str(tiny_models.path("qwen3")))
    assert result.returncode == 1 and "belongs to uid" in result.stderr, result.stderr


def test_a_new_runtime_dir_is_created_private(servers, tiny_models, tmp_path):
    runtime_dir = tmp_path / "fresh" / "run"
    servers.start({"m": {"path": str(tiny_models.path("qwen3"))}}, server={"runtime_dir": str(runtime_dir)})
    assert runtime_dir.stat().st_mode & 0o777 == 0o700
    for sock in runtime_dir.glob("*.sock"):
        assert sock.stat().st_mode & 0o777 == 0o600
