"""Live ``rapid-mlx serve`` processes on loopback for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import tomli_w

from router.bench.targets import free_port

READY_TIMEOUT_S = 120.0


@dataclass
class LiveServer:
    process: subprocess.Popen
    port: int
    log_path: Path
    runtime_dir: Path
    config_path: Path  # the path the server was given (a symlink, when started with symlink=True)
    config: dict  # the TOML it serves, as written

    def write_config(self, models: dict[str, dict] | None = None, *, server: dict | None = None) -> None:
        """Rewrite the config file in place (through the symlink, if it is one) with these tables."""
        if models is not None:
            self.config["models"] = models
        if server:
            self.config["server"].update(server)
        self.config_path.write_text(tomli_w.dumps(self.config))

    def admin(self, path: str = "/admin/status", method: str = "GET", headers: dict | None = None) -> httpx.Response:
        return httpx.request(method, self.base_url + path, timeout=180, headers=headers)

    def status(self, headers: dict | None = None) -> dict:
        return self.admin(headers=headers).json()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def openai(self, api_key: str = "unused"):
        """An openai client for this server that validates every response strictly."""
        import openai

        return openai.OpenAI(base_url=self.base_url + "/v1", api_key=api_key, max_retries=0, _strict_response_validation=True)

    def anthropic(self, api_key: str = "unused"):
        """An anthropic client for this server that validates every response strictly."""
        import anthropic

        return anthropic.Anthropic(base_url=self.base_url, api_key=api_key, max_retries=0, _strict_response_validation=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_pid(self, model_id: str) -> int:
        """PID of a model's worker: a child of this server with ``--model-id <id>`` on its command line."""
        marker = b"\0--model-id\0" + model_id.encode() + b"\0"
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile, or not ours to read
            if parent == self.process.pid and b"engines.worker" in cmdline and marker in cmdline:
                return int(entry.name)
        raise LookupError(f"no worker process for {model_id}")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S, *, key: str | None = None) -> None:
        """Wait for /ready (asked with ``key`` when the server has [[keys]])."""
        headers = {"x-api-key": key} if key else {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.base_url + "/ready", timeout=2, headers=headers).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet; poll again
            time.sleep(0.2)
        raise TimeoutError(f"server not ready after {timeout_s}s:\n{self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class ServerFactory:
    def __init__(self, root: Path) -> None:
        self._root = root
        self._servers: list[LiveServer] = []

    def start(self, models: dict[str, dict], *, server: dict | None = None, wait: bool = True, symlink: bool = False,
              keys: list[dict] | None = None, env: dict[str, str] | None = None, ready_key: str | None = None,
              port: int | None = None) -> LiveServer:
        """Write a config with these ``[models.*]`` (and ``[[keys]]``) tables and serve it (through a
        symlink if asked), with ``env`` added to the server's environment, on ``port`` (default: a free one)."""
        index = len(self._servers)
        runtime_dir = self._root / f"run{index}"
        port = port or free_port()
        config = {"server": {"port": port, "runtime_dir": str(runtime_dir), "offline": True, **(server or {})}, "models": models}
        if keys:
            config["keys"] = keys
        config_path = self._root / f"config{index}.toml"
        if symlink:
            target = self._root / f"targets{index}" / "v1.toml"
            target.parent.mkdir()
            target.write_text(tomli_w.dumps(config))
            config_path.symlink_to(target)
        else:
            config_path.write_text(tomli_w.dumps(config))
        log_path = self._root / f"server{index}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "router.cli", "serve", "--config", str(config_path)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        live = LiveServer(process, port, log_path, Path(config["server"]["runtime_dir"]), config_path, config)
        self._servers.append(live)
        if wait:
            live.wait_ready(key=ready_key)
        return live

    def stop_all(self) -> None:
        for live in self._servers:
            live.stop()


def wait_for(condition, timeout_s: float = 60.0, what: str = "condition"):
    """Poll ``condition`` until it returns something truthy (returned), or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
