"""The servers a bench measures: one already running, or one it launches fresh per phase."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from engines.cpu_blas import choose_cpu_blas
from router.bench.client import BenchClient

STOP_TIMEOUT_S = 60.0


class TargetError(RuntimeError):
    """A launched server that did not come up, or a target that cannot do what a workload needs."""


@dataclass(frozen=True)
class TargetSpec:
    """A server under test: ``base_url`` of a running one, or a ``launch`` command with ``{port}``."""

    label: str
    base_url: str | None = None
    launch: str | None = None

    def __post_init__(self) -> None:
        if (self.base_url is None) == (self.launch is None):
            raise ValueError("a target has either a base URL or a launch command")
        if self.launch is not None and "{port}" not in self.launch:
            raise ValueError(f"launch command has no {{port}} placeholder: {self.launch!r}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LaunchedProcess:
    """One start of a launch command, its output kept in a log file."""

    def __init__(self, command: str, log_path: Path, port: int, *, append: bool) -> None:
        self.port = port
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = shlex.split(command.replace("{port}", str(self.port)))
        with open(log_path, "ab" if append else "wb") as log:
            log.write(f"$ {shlex.join(argv)}\n".encode())
            log.flush()
            # Its own session, so whatever it spawns (workers) can be stopped with it.
            # Every side of a comparison multiplies with the same BLAS: the one our workers would preload.
            blas = choose_cpu_blas("auto").worker_env(os.environ)
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **blas, "PYTHONUNBUFFERED": "1"})

    def exited(self) -> int | None:
        return self.process.poll()

    def stop(self, *, kill: bool = False) -> int:
        """Graceful stop (SIGTERM, as a service manager sends), then kill what is left; returns its exit code.

        ``kill``: SIGKILL it and everything it started at once, as a crash or a power cut would.
        """
        if kill and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # children it left behind
        except ProcessLookupError:
            pass  # the whole group is gone already: the normal case
        return self.process.returncode

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class Server:
    """A target while a phase runs against it."""

    def __init__(self, spec: TargetSpec, log_path: Path, *, model: str, api: str, ready_timeout_s: float) -> None:
        self.spec = spec
        self._log_path = log_path
        self._model = model
        self._api = api
        self._ready_timeout_s = ready_timeout_s
        self._launched: LaunchedProcess | None = None
        # Kept across restarts, as a service keeps its address: clients need not follow it.
        self._port = free_port()
        self.exit_codes: list[int] = []  # of each launched process, once stopped

    @property
    def base_url(self) -> str:
        if self.spec.launch is not None:
            return f"http://127.0.0.1:{self._port}"
        url = self.spec.base_url.rstrip("/")
        return url.removesuffix("/v1")  # either spelling: the OpenAI SDK's (…/v1) or the server's root

    @property
    def can_restart(self) -> bool:
        return self.spec.launch is not None

    async def start(self) -> None:
        if self.spec.launch is not None:
            # A restart appends to the phase's log; a phase's first start replaces an older run's.
            self._launched = LaunchedProcess(self.spec.launch, self._log_path, self._port, append=bool(self.exit_codes))
        await self._wait_ready()

    async def stop(self, *, kill: bool = False) -> None:
        if self._launched is not None:
            launched, self._launched = self._launched, None
            self.exit_codes.append(await asyncio.to_thread(launched.stop, kill=kill))

    async def restart(self, *, kill: bool = False) -> None:
        """Stop (gracefully, or ``kill``: SIGKILL to its whole process group) and start again
        (launched targets only)."""
        if not self.can_restart:
            raise TargetError("a restart needs a launched server (--launch or --compare)")
        await self.stop(kill=kill)
        await self.start()

    def died(self) -> int | None:
        """The exit code of a launched server that exited on its own during the phase."""
        return self._launched.exited() if self._launched else None

    async def _wait_ready(self) -> None:
        """Until ``/v1/models`` answers and one one-token chat succeeds (the model is loaded)."""
        deadline = time.monotonic() + self._ready_timeout_s
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self._ready_timeout_s) as http:
            client = BenchClient(http, api=self._api, model=self._model)
            while True:
                if self._launched is not None and self._launched.exited() is not None:
                    raise TargetError(f"{self.spec.label} exited ({self._launched.exited()}) before it was ready:\n"
                                      f"{self._launched.log_tail()}")
                if time.monotonic() > deadline:
                    raise TargetError(f"{self.spec.label} not ready after {self._ready_timeout_s:.0f} s at {self.base_url}")
                if await self._probe(http, client):
                    return
                await asyncio.sleep(0.3)

    async def _probe(self, http: httpx.AsyncClient, client: BenchClient) -> bool:
        try:
            if (await http.get("/v1/models")).status_code != 200:
                return False
        except httpx.TransportError:
            return False  # not listening yet
        warm = await client.send({"messages": [{"role": "user", "content": "ready?"}]}, max_tokens=1, stream=False,
                                 phase_start=time.perf_counter(), target=self.spec.label, round=0, phase="ready", index=0)
        if warm.status in (400, 401, 403, 404, 422):
            raise TargetError(f"{self.spec.label} refused the warm-up request ({warm.status}: {warm.error}); "
                              "check --model and --api")
        return warm.ok


@asynccontextmanager
async def serving(spec: TargetSpec, log_path: Path, *, model: str, api: str, ready_timeout_s: float) -> AsyncIterator[Server]:
    """The target, ready, for one phase; a launched one is started fresh and stopped after."""
    server = Server(spec, log_path, model=model, api=api, ready_timeout_s=ready_timeout_s)
    try:
        await server.start()
        yield server
    finally:
        await server.stop()
