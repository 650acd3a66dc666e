"""Process entry of a model worker: ``python -m engines.worker --model-id ID``, with its
``WorkerSpec`` as JSON in ``RAPIDMLX_WORKER_SPEC`` (the environment is private to its user;
the command line is not).

Two threads, so the engine loop never waits to read a socket (the shape of vLLM's engine core):
- the reader thread decodes ``WorkerInput`` frames into a queue;
- the main thread loads the model and runs the scheduler loop: drain inputs, step, send the
  step's outputs; it is the only thread that makes MLX calls.
Outputs are sent from the engine thread itself: a frame is a few hundred bytes and the router
always reads, so a writer thread would only add a hand-off per step.
The router owns the listening socket; the worker connects to it, trades hellos carrying the
spec's token (and exits if the listener is not its router), says ``WorkerReady`` once the
model is loaded, and exits when the router closes the connection or sends ``Shutdown``. An
engine that cannot recover from a failed step sends ``WorkerFatal`` and exits non-zero, and
the router starts a fresh process.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import logging
import os
import queue
import signal
import socket
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import msgspec

from engines.protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    SPEC_ENV,
    AbortRequest,
    AddRequest,
    ErrorKind,
    RouterWelcome,
    Shutdown,
    StatusQuery,
    WorkerFatal,
    WorkerHello,
    WorkerInput,
    WorkerReady,
    WorkerSpec,
    StepOutputs,
    decode_input,
    encode_frame,
)
from engines.errors import EngineUnrecoverableError

logger = logging.getLogger("engines.worker")

WELCOME_TIMEOUT_S = 30.0
EXIT_NOT_MY_ROUTER = 3


def recv_exact(sock: socket.socket, size: int) -> bytes | None:
    """Exactly ``size`` bytes from ``sock``, or None if it closes first."""
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _recv_frame(sock: socket.socket) -> WorkerInput | None:
    """One input frame, or None at end of stream."""
    header = recv_exact(sock, FRAME_HEADER.size)
    if header is None:
        return None
    (size,) = FRAME_HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {size} bytes exceeds the limit")
    payload = recv_exact(sock, size)
    return None if payload is None else decode_input(payload)


def read_inputs(sock: socket.socket, inbox: queue.Queue[WorkerInput]) -> None:
    """Reader thread: frames → ``inbox``; a closed or broken connection becomes ``Shutdown``."""
    try:
        while (message := _recv_frame(sock)) is not None:
            inbox.put(message)
    except (OSError, ValueError, msgspec.DecodeError):
        logger.exception("input connection failed")
    inbox.put(Shutdown())


def greet_router(sock: socket.socket, token: str) -> bool:
    """Say hello with our token and wait for the router's welcome carrying the same token.

    A listener that closes, stays silent or answers with another token is not the router
    that started this worker (another router's socket, or one put in its place).
    """
    sock.sendall(encode_frame(WorkerHello(PROTOCOL_VERSION, token, os.getpid())))
    sock.settimeout(WELCOME_TIMEOUT_S)
    try:
        welcome = _recv_frame(sock)
    except (OSError, ValueError, msgspec.DecodeError):
        welcome = None
    finally:
        sock.settimeout(None)
    return isinstance(welcome, RouterWelcome) and hmac.compare_digest(welcome.token, token)


@dataclass(frozen=True)
class _Compiled:
    """A request whose grammar finished compiling (the future holds its matcher or the error)."""

    request: AddRequest
    future: Future


class EngineLoop:
    """The busy loop: two named phases, drain inputs then step (see module docstring)."""

    def __init__(self, scheduler, inbox: queue.Queue[WorkerInput], sock: socket.socket, grammars=None) -> None:
        self._scheduler = scheduler
        self._inbox = inbox
        self._sock = sock
        self._grammars = grammars
        self._compiling: set[str] = set()  # requests whose grammar compiles on its own thread
        self._running = True
        self.fatal: str | None = None  # why the engine cannot go on, once it cannot

    def run(self) -> None:
        while self._running:
            self._drain_inputs(block=not self._scheduler.has_work)
            if self._scheduler.has_work:
                self._step()

    def _drain_inputs(self, *, block: bool) -> None:
        try:
            message = self._inbox.get(block=block)
        except queue.Empty:
            return
        while True:
            self._apply(message)
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _apply(self, message: WorkerInput) -> None:
        try:
            if isinstance(message, AddRequest) and message.grammar and self._grammars is not None:
                self._compile(message)
            elif isinstance(message, AddRequest):
                self._scheduler.add(message)
            elif isinstance(message, _Compiled):
                self._compiled(message)
            elif isinstance(message, AbortRequest):
                self._compiling.difference_update(message.request_ids)
                self._scheduler.abort(list(message.request_ids))
            elif isinstance(message, StatusQuery):
                self._send_frame(self._scheduler.status())
            elif isinstance(message, Shutdown):
                self._running = False
        except Exception:  # engine boundary: as for a failed step
            logger.error("applying %s failed; resetting the engine", type(message).__name__, exc_info=True)
            self._recover()

    def _compile(self, request: AddRequest) -> None:
        """Compile the request's grammar off this thread; it joins the scheduler when done."""
        self._compiling.add(request.request_id)
        self._grammars.submit(request.grammar, lambda future: self._inbox.put(_Compiled(request, future)))

    def _compiled(self, done: _Compiled) -> None:
        from engines.grammar import GrammarError

        request = done.request
        if request.request_id not in self._compiling:
            return  # aborted while its grammar compiled
        self._compiling.discard(request.request_id)
        try:
            matcher = done.future.result()
        except GrammarError as exc:
            self._scheduler.reject(request.request_id, f"the grammar does not compile: {exc}", ErrorKind.INVALID_REQUEST)
            return
        except Exception:  # the compile thread's failure (say, an unreadable tokenizer): this request's alone
            logger.error("compiling the grammar of request %s failed", request.request_id, exc_info=True)
            self._scheduler.reject(request.request_id, "the engine could not compile the request's grammar", ErrorKind.ENGINE)
            return
        self._scheduler.add(request, matcher)

    def _step(self) -> None:
        try:
            outputs = self._scheduler.step()
        except Exception:  # engine boundary: one bad step must not kill the model
            logger.error("engine step failed; failing in-flight requests and resetting the engine", exc_info=True)
            self._recover()
            return
        self._send(outputs)

    def _recover(self) -> None:
        """Fail what was in flight, then rebuild the engine, or stop the worker if it cannot be."""
        self._send(self._scheduler.fail_all())
        try:
            self._scheduler.rebuild()
        except EngineUnrecoverableError as exc:
            logger.error("engine cannot recover; exiting so the router starts a new worker", exc_info=True)
            self.fatal = str(exc)
            self._running = False

    def _send(self, outputs: StepOutputs) -> None:
        if outputs.outputs:
            self._send_frame(outputs)

    def _send_frame(self, message) -> None:
        try:
            self._sock.sendall(encode_frame(message))
        except OSError:
            logger.warning("router connection lost; stopping")
            self._running = False


def serve(spec: WorkerSpec) -> int:
    """Connect to the router, load the model, run the engine loop until told to stop."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(spec.socket_path)
    if not greet_router(sock, spec.token):
        logger.error("the listener at %s is not the router that started this worker; exiting", spec.socket_path)
        sock.close()
        return EXIT_NOT_MY_ROUTER
    try:
        scheduler = _load(spec)
    except Exception as exc:  # process boundary: report why, then die
        logger.error("failed to load %s", spec.model_path, exc_info=True)
        sock.sendall(encode_frame(WorkerFatal(f"failed to load model {spec.model_id!r}: {exc}")))
        sock.close()
        return 1
    inbox: queue.Queue[WorkerInput] = queue.Queue()
    threading.Thread(target=read_inputs, args=(sock, inbox), name="reader", daemon=True).start()
    sock.sendall(encode_frame(WorkerReady(PROTOCOL_VERSION, spec.model_id, spec.max_context, os.getpid(), scheduler.vocab_size,
                                          scheduler.exact_snapshots)))
    logger.info("ready: %s (max_context=%d, vocab_size=%d)", spec.model_id, spec.max_context, scheduler.vocab_size)
    from engines.grammar import GrammarCompiler

    grammars = GrammarCompiler(Path(spec.model_path), vocab_size=scheduler.vocab_size)
    loop = EngineLoop(scheduler, inbox, sock, grammars)
    # A stop is the router's to order (it tells the worker to shut down, after which the
    # prefix cache is flushed): Ctrl-C reaches the whole process group, and is left to the
    # router; SIGTERM sent to the worker itself (a service manager) stops it the same way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: inbox.put(Shutdown()))
    loop.run()
    grammars.close()
    if loop.fatal is not None:
        with contextlib.suppress(OSError):
            sock.sendall(encode_frame(WorkerFatal(loop.fatal)))
        _flush_prefix_cache(scheduler, spec)  # the entries were computed before the engine broke
        sock.close()
        return 1
    scheduler.close()
    _flush_prefix_cache(scheduler, spec)
    sock.close()
    return 0


def _load(spec: WorkerSpec):
    # Imported here so a bad install fails as a WorkerFatal the router can show.
    from mlx_lm.utils import load_model

    from caches.prefix_cache import PrefixCache
    from engines.kv_quantization import checked_kv_settings
    from engines.scheduler import Scheduler

    model, _ = load_model(Path(spec.model_path))
    quantization = checked_kv_settings(model, spec)
    prefix_cache = None
    if spec.prefix_cache_bytes > 0:
        prefix_cache = PrefixCache(memory_bytes=spec.prefix_cache_bytes, min_tokens=spec.prefix_cache_min_tokens,
                                   disk=_disk_tier(spec, quantization))
        if prefix_cache.disk is not None:
            found = prefix_cache.restore()
            logger.info("prefix cache on disk: %d entries (%.1f MiB) in %.2fs at %s", found, prefix_cache.disk.stats.bytes / 2**20,
                        prefix_cache.disk.stats.restore_seconds, prefix_cache.disk.directory)
    return Scheduler(model, max_concurrency=spec.max_concurrency, prefill_step=spec.prefill_step, max_context=spec.max_context,
                     prefix_cache=prefix_cache, kv_quantization=quantization, kv_window=spec.kv_window)


def _flush_prefix_cache(scheduler, spec: WorkerSpec) -> None:
    cache = scheduler.prefix_cache
    if cache is None or cache.disk is None:
        return
    left = cache.disk.flush(spec.prefix_cache_flush_timeout_s)
    logger.info("prefix cache on disk: flushed in %.2fs (%d entries not written), %d entries (%.1f MiB)",
                cache.disk.stats.flush_seconds, left, cache.disk.stats.entries, cache.disk.stats.bytes / 2**20)


def _disk_tier(spec: WorkerSpec, quantization):
    """The prefix cache's disk tier, or None when it is off or its directory cannot be used
    (the cache then works in memory only: a warning, not a failed model)."""
    from caches.disk import DiskTier, fingerprint

    if not spec.prefix_cache_dir or spec.prefix_cache_disk_bytes <= 0:
        return None
    settings = {"kv_bits": spec.kv_bits, "kv_group_size": spec.kv_group_size, "kv_quantize_after": spec.kv_quantize_after}
    if spec.kv_window:  # a windowed cache's entries are not the whole context's (named only when set: older entries stay valid)
        settings["kv_window"] = spec.kv_window
    try:
        return DiskTier(Path(spec.prefix_cache_dir), fingerprint(Path(spec.model_path), settings),
                        budget_bytes=spec.prefix_cache_disk_bytes, quantization=quantization,
                        max_pending_bytes=max(spec.prefix_cache_bytes // 4, 64 << 20))
    except OSError as exc:
        logger.warning("prefix cache on disk is off: cannot use %s: %s", spec.prefix_cache_dir, exc)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.worker", description=f"A model worker; its WorkerSpec is read from ${SPEC_ENV}.")
    # Only so that `ps` shows which model a worker serves; the spec is the authority.
    parser.add_argument("--model-id", required=True)
    parser.parse_args(argv)
    spec_json = os.environ.pop(SPEC_ENV, None)
    if spec_json is None:
        parser.error(f"${SPEC_ENV} is not set")
    spec = msgspec.json.decode(spec_json.encode(), type=WorkerSpec)
    logging.basicConfig(
        level=spec.log_level.upper(),
        format=f"%(asctime)s %(levelname)s worker[{spec.model_id}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main())
