"""The router's handle on one worker process: spawn, handshake, submit, abort, restart.

States follow llama-swap's process lifecycle:

    STOPPED --start()--> STARTING --WorkerReady--> READY
       ^                    |  ^                     |
       |              load failed  \\--- restart ---- process died (requests fail with
    STOPPING <--stop()-- FAILED <---------------------/   WorkerDiedError, then backoff)

A first start that fails to load, or ``crash_limit`` crashes within ``crash_window_s``, ends
supervision: the state stays FAILED with ``gave_up`` set, and only a new handle tries again.

One reader task per worker is the only loop over ``StepOutputs``; it hands each
``TokenDelta`` to its request's mailbox.

Only a connection that says ``WorkerHello`` with this handle's token is taken for its worker;
anything else that reaches the socket (another router's worker, a stray client) is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hmac
import logging
import os
import signal
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import msgspec

from engines.errors import WorkerDiedError, WorkerLoadError, WorkerNotReadyError
from engines.protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    SPEC_ENV,
    AbortRequest,
    AddRequest,
    RouterWelcome,
    Shutdown,
    StatusQuery,
    StepOutputs,
    TokenDelta,
    WorkerFatal,
    WorkerHello,
    WorkerReady,
    WorkerSpec,
    WorkerStatus,
    decode_output,
    encode_frame,
)
from engines.shard.launch import free_port_run, launch_argv, rank_count

logger = logging.getLogger(__name__)

RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
HELLO_TIMEOUT_S = 10.0


class WorkerState(enum.Enum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPING = "stopping"


class RequestMailbox:
    """Merge-on-put delivery: the consumer takes everything that arrived since its last read."""

    def __init__(self) -> None:
        self._pending: list[TokenDelta] = []
        self._error: BaseException | None = None
        self._event = asyncio.Event()

    def put(self, delta: TokenDelta) -> None:
        self._pending.append(delta)
        self._event.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._event.set()

    async def get(self, timeout_s: float | None = None) -> list[TokenDelta]:
        """Everything that arrived since the last read; ``[]`` if ``timeout_s`` passed first."""
        if not self._pending and self._error is None:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._event.wait()
            except TimeoutError:
                return []
        self._event.clear()
        batch, self._pending = self._pending, []
        if not batch and self._error is not None:
            raise self._error
        return batch


class WorkerHandle:
    """Owns one worker process and its socket; restarts it when it dies."""

    def __init__(self, spec: WorkerSpec, *, load_timeout_s: float = 600.0, crash_limit: int = 5, crash_window_s: float = 300.0,
                 env: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        self._env = dict(env or {})  # set in the worker's environment on top of ours (a BLAS preload)
        self.state = WorkerState.STOPPED
        self.last_error: str | None = None
        self.restarts = 0
        self.gave_up = False  # the supervisor stopped restarting: a first load that failed, or crash_limit reached
        self._crash_limit = crash_limit
        self._crash_window_s = crash_window_s
        self._crashes: deque[float] = deque()  # monotonic times of the crashes inside the window
        self.vocab_size = 0  # from the worker's WorkerReady
        self.exact_snapshots = False  # from WorkerReady: requests should name their turn boundaries
        self._load_timeout_s = load_timeout_s
        self._process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._mailboxes: dict[str, RequestMailbox] = {}
        self._status_waiters: deque[asyncio.Future[WorkerStatus]] = deque()  # the worker answers in order
        self._ready = asyncio.Event()
        self._supervisor: asyncio.Task | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start supervising: spawn the worker now and again whenever it dies."""
        if self._supervisor is None or self._supervisor.done():
            self._supervisor = asyncio.create_task(self._supervise(), name=f"worker[{self.spec.model_id}]")

    async def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until the worker is READY; raise WorkerLoadError if it cannot load (or gave up, or was stopped).

        Never starts the worker: one that was stopped or gave up stays so (its owner starts a new one).
        """
        if self._supervisor is None:
            raise WorkerNotReadyError(f"model {self.spec.model_id!r} was never started")
        waiter = asyncio.ensure_future(self._ready.wait())
        done, _ = await asyncio.wait({waiter, self._supervisor}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self.state is WorkerState.READY:
            return
        if self._supervisor in done:
            raise WorkerLoadError(self.last_error or "worker stopped")
        raise WorkerNotReadyError(f"model {self.spec.model_id!r} is still loading")

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the worker to exit; kill it if it has not within ``timeout_s``."""
        self.state = WorkerState.STOPPING
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        await self._terminate(timeout_s)
        self._fail_all(WorkerNotReadyError(f"model {self.spec.model_id!r} was stopped"))
        self.state = WorkerState.STOPPED

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    # ------------------------------------------------------------------ requests

    async def generate(self, request: AddRequest, *, heartbeat_s: float | None = None) -> AsyncIterator[list[TokenDelta]]:
        """Submit a request and yield its deltas as they arrive; abort it if the caller stops early.

        With ``heartbeat_s``, an empty batch is yielded whenever the worker has been silent that
        long (a long prefill), so callers can keep their connection visibly alive.
        """
        if self.state is not WorkerState.READY or self._writer is None:
            raise WorkerNotReadyError(f"model {self.spec.model_id!r} is {self.state.value}")
        mailbox = RequestMailbox()
        self._mailboxes[request.request_id] = mailbox
        finished = False
        try:
            self._writer.write(encode_frame(request))
            while not finished:
                batch = await mailbox.get(heartbeat_s)
                finished = any(delta.finish_reason is not None for delta in batch)
                yield batch
        finally:
            self._mailboxes.pop(request.request_id, None)
            if not finished:
                self.abort(request.request_id)

    async def status(self, timeout_s: float = 5.0) -> WorkerStatus:
        """The worker's load and prefix-cache counters (asked between two engine steps)."""
        if self.state is not WorkerState.READY or self._writer is None:
            raise WorkerNotReadyError(f"model {self.spec.model_id!r} is {self.state.value}")
        waiter: asyncio.Future[WorkerStatus] = asyncio.get_running_loop().create_future()
        self._status_waiters.append(waiter)
        self._writer.write(encode_frame(StatusQuery()))
        return await asyncio.wait_for(asyncio.shield(waiter), timeout_s)

    def abort(self, request_id: str) -> None:
        """Free the request's slot in the worker (idempotent; a dead worker needs nothing)."""
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(encode_frame(AbortRequest([request_id])))

    # ------------------------------------------------------------------ internal

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            error = await self._run_once()
            if self.state is WorkerState.STOPPING:
                return
            if error is not None and attempt == 0 and self.restarts == 0:
                # The first start failed to load: a config problem, not a crash. Stop trying.
                self.state, self.gave_up = WorkerState.FAILED, True
                return
            if self._crashed_too_often():
                # A worker that keeps dying would loop forever; the operator retries (reload or load).
                self.state, self.gave_up = WorkerState.FAILED, True
                self.last_error = f"crashed {len(self._crashes)} times in {self._crash_window_s:.0f}s; last: {self.last_error or 'worker exited'}"
                logger.error("worker[%s] %s; not restarting it", self.spec.model_id, self.last_error)
                return
            delay = RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
            logger.warning("worker[%s] died; restarting in %.1fs", self.spec.model_id, delay)
            await asyncio.sleep(delay)
            self.restarts += 1
            attempt = attempt + 1 if error is not None else 0

    def _crashed_too_often(self) -> bool:
        now = time.monotonic()
        self._crashes.append(now)
        while self._crashes and now - self._crashes[0] > self._crash_window_s:
            self._crashes.popleft()
        return len(self._crashes) >= self._crash_limit

    async def _run_once(self) -> str | None:
        """Spawn, handshake and serve until the worker dies. Returns a load error, if any."""
        self.state = WorkerState.STARTING
        socket_path = Path(self.spec.socket_path)
        socket_path.unlink(missing_ok=True)
        connected: asyncio.Future = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if await self._is_our_worker(reader) and not connected.done():
                writer.write(encode_frame(RouterWelcome(self.spec.token)))
                connected.set_result((reader, writer))
                return
            logger.warning("worker[%s]: closed a connection that is not this router's worker", self.spec.model_id)
            writer.close()

        server = await asyncio.start_unix_server(on_connect, path=str(socket_path), limit=MAX_FRAME_BYTES)
        os.chmod(socket_path, 0o600)
        try:
            self._process = await self._spawn()
            reader, self._writer = await self._await_connection(connected)
            ready = await self._handshake(reader)
            if isinstance(ready, str):
                self.last_error = ready
                return ready
            self.state, self.last_error, self.vocab_size = WorkerState.READY, None, ready.vocab_size
            self.exact_snapshots = ready.exact_snapshots
            self._ready.set()
            logger.info("worker[%s] ready (pid %s)", self.spec.model_id, self._process.pid)
            await self._serve(reader)
            return None
        except WorkerLoadError as exc:
            self.last_error = str(exc)
            return str(exc)
        finally:
            self._ready.clear()
            server.close()
            await self._terminate(timeout_s=5.0)
            self._fail_all(WorkerDiedError(f"model {self.spec.model_id!r} worker exited"))
            socket_path.unlink(missing_ok=True)
            if self.state is not WorkerState.STOPPING:
                self.state = WorkerState.FAILED
                if self.last_error is None and self._process is not None:
                    self.last_error = f"worker exited with status {self._process.returncode}"

    async def _spawn(self) -> asyncio.subprocess.Process:
        # The spec (with its token) goes in the environment: other local users can read a
        # process's command line, not its environment.
        env = {**os.environ, **self._env, SPEC_ENV: msgspec.json.encode(self.spec).decode()}
        if self.spec.shard is not None:
            # Its own session, so the group (launcher and local ranks) is killed as one.
            try:
                argv = launch_argv(self.spec, starting_port=free_port_run(rank_count(self.spec.shard)))
            except OSError as exc:
                raise WorkerLoadError(f"cannot launch the shards of {self.spec.model_id!r}: {exc}") from None
            return await asyncio.create_subprocess_exec(*argv, env=env, start_new_session=True)
        # A fresh interpreter (fork+exec), never a fork of the router: MLX must not be forked.
        return await asyncio.create_subprocess_exec(sys.executable, "-m", "engines.worker", "--model-id", self.spec.model_id, env=env)

    async def _is_our_worker(self, reader: asyncio.StreamReader) -> bool:
        """Whether the peer's first frame is a hello with this handle's token and protocol."""
        try:
            hello = await asyncio.wait_for(self._read_frame(reader), timeout=HELLO_TIMEOUT_S)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError, msgspec.DecodeError):
            return False
        return (
            isinstance(hello, WorkerHello)
            and hmac.compare_digest(hello.token, self.spec.token)
            and hello.protocol_version == PROTOCOL_VERSION
        )

    async def _await_connection(self, connected: asyncio.Future):
        exited = asyncio.ensure_future(self._process.wait())
        done, _ = await asyncio.wait({connected, exited}, timeout=self._load_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        if connected in done:
            return connected.result()
        raise WorkerLoadError(f"worker for {self.spec.model_id!r} exited before connecting")

    async def _handshake(self, reader: asyncio.StreamReader) -> WorkerReady | str:
        try:
            message = await asyncio.wait_for(self._read_frame(reader), timeout=self._load_timeout_s)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError, msgspec.DecodeError):
            raise WorkerLoadError(f"worker for {self.spec.model_id!r} died while loading") from None
        if isinstance(message, WorkerFatal):
            return message.message
        if not isinstance(message, WorkerReady):
            raise WorkerLoadError(f"unexpected first frame {type(message).__name__}")
        return message

    async def _pump(self, reader: asyncio.StreamReader) -> None:
        """The only loop over StepOutputs: route each delta to its mailbox until EOF."""
        while True:
            try:
                message = await self._read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            except (ValueError, msgspec.DecodeError):
                logger.error("worker[%s] sent a malformed frame; restarting it", self.spec.model_id, exc_info=True)
                return
            if isinstance(message, StepOutputs):
                for delta in message.outputs:
                    mailbox = self._mailboxes.get(delta.request_id)
                    if mailbox is not None:
                        mailbox.put(delta)
            elif isinstance(message, WorkerStatus):
                if self._status_waiters:
                    waiter = self._status_waiters.popleft()
                    if not waiter.done():
                        waiter.set_result(message)
            elif isinstance(message, WorkerFatal):
                logger.error("worker[%s] fatal: %s", self.spec.model_id, message.message)
                return

    async def _serve(self, reader: asyncio.StreamReader) -> None:
        """Pump until the worker is gone; a sharded group is gone as soon as its launcher is
        (a rank died and ``mlx.launch`` ended the others), whatever rank 0's socket says."""
        if self.spec.shard is None:
            await self._pump(reader)
            return
        pump, exited = asyncio.ensure_future(self._pump(reader)), asyncio.ensure_future(self._process.wait())
        await asyncio.wait({pump, exited}, return_when=asyncio.FIRST_COMPLETED)
        for task in (pump, exited):
            task.cancel()

    @staticmethod
    async def _read_frame(reader: asyncio.StreamReader):
        header = await reader.readexactly(FRAME_HEADER.size)
        (size,) = FRAME_HEADER.unpack(header)
        if size > MAX_FRAME_BYTES:
            raise ValueError(f"frame of {size} bytes exceeds the limit")
        return decode_output(await reader.readexactly(size))

    async def _terminate(self, timeout_s: float) -> None:
        process, writer = self._process, self._writer
        self._writer = None
        if writer is not None and not writer.is_closing():
            with contextlib.suppress(ConnectionError):
                writer.write(encode_frame(Shutdown()))
                await writer.drain()
            writer.close()
        if process is not None and process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), timeout=timeout_s)
            except TimeoutError:
                logger.warning("worker[%s] did not exit in %.0fs; killing", self.spec.model_id, timeout_s)
                process.kill()
                await process.wait()
        if process is not None and self.spec.shard is not None:
            # Ranks can outlive their launcher (killed alone, or stuck in a collective): the
            # whole session goes, so no rank of an old group is left holding memory and ports.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

    def _fail_all(self, error: BaseException) -> None:
        mailboxes, self._mailboxes = self._mailboxes, {}
        for mailbox in mailboxes.values():
            mailbox.fail(error)
        waiters, self._status_waiters = self._status_waiters, deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
