"""Process entry of a model worker: ``python -m engines.worker --spec JSON``.

Two threads, so the engine loop never waits to read a socket (the shape of vLLM's engine core):
- the reader thread decodes ``WorkerInput`` frames into a queue;
- the main thread loads the model and runs the scheduler loop: drain inputs, step, send the
  step's outputs; it is the only thread that makes MLX calls.
Outputs are sent from the engine thread itself: a frame is a few hundred bytes and the router
always reads, so a writer thread would only add a hand-off per step.
The router owns the listening socket; the worker connects to it, says ``WorkerReady`` and
exits when the router closes the connection or sends ``Shutdown``.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import socket
import sys
import threading
from pathlib import Path

import msgspec

from engines.protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    AbortRequest,
    AddRequest,
    Shutdown,
    WorkerFatal,
    WorkerInput,
    WorkerReady,
    WorkerSpec,
    decode_input,
    encode_frame,
)

logger = logging.getLogger("engines.worker")


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_inputs(sock: socket.socket, inbox: queue.Queue[WorkerInput]) -> None:
    """Reader thread: frames → ``inbox``; a closed or broken connection becomes ``Shutdown``."""
    try:
        while True:
            header = _recv_exact(sock, FRAME_HEADER.size)
            if header is None:
                break
            (size,) = FRAME_HEADER.unpack(header)
            if size > MAX_FRAME_BYTES:
                raise ValueError(f"frame of {size} bytes exceeds the limit")
            payload = _recv_exact(sock, size)
            if payload is None:
                break
            inbox.put(decode_input(payload))
    except (OSError, ValueError, msgspec.DecodeError):
        logger.exception("input connection failed")
    inbox.put(Shutdown())


class EngineLoop:
    """The busy loop: two named phases, drain inputs then step (see module docstring)."""

    def __init__(self, scheduler, inbox: queue.Queue[WorkerInput], sock: socket.socket) -> None:
        self._scheduler = scheduler
        self._inbox = inbox
        self._sock = sock
        self._running = True

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
        if isinstance(message, AddRequest):
            self._scheduler.add(message)
        elif isinstance(message, AbortRequest):
            self._scheduler.abort(list(message.request_ids))
        elif isinstance(message, Shutdown):
            self._running = False

    def _step(self) -> None:
        try:
            outputs = self._scheduler.step()
        except Exception as exc:  # process boundary: one bad step must not kill the model
            logger.error("engine step failed; failing in-flight requests", exc_info=True)
            outputs = self._scheduler.fail_all(f"engine error: {exc}")
        if outputs.outputs:
            try:
                self._sock.sendall(encode_frame(outputs))
            except OSError:
                logger.warning("router connection lost; stopping")
                self._running = False


def serve(spec: WorkerSpec) -> int:
    """Connect to the router, load the model, run the engine loop until told to stop."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(spec.socket_path)
    try:
        scheduler = _load(spec)
    except Exception as exc:  # process boundary: report why, then die
        logger.error("failed to load %s", spec.model_path, exc_info=True)
        sock.sendall(encode_frame(WorkerFatal(f"failed to load model {spec.model_id!r}: {exc}")))
        sock.close()
        return 1
    inbox: queue.Queue[WorkerInput] = queue.Queue()
    threading.Thread(target=read_inputs, args=(sock, inbox), name="reader", daemon=True).start()
    sock.sendall(encode_frame(WorkerReady(PROTOCOL_VERSION, spec.model_id, spec.max_context, os.getpid())))
    logger.info("ready: %s (max_context=%d)", spec.model_id, spec.max_context)
    EngineLoop(scheduler, inbox, sock).run()
    scheduler.close()
    sock.close()
    return 0


def _load(spec: WorkerSpec):
    # Imported here so a bad install fails as a WorkerFatal the router can show.
    from mlx_lm.utils import load_model

    from engines.scheduler import Scheduler

    model, _ = load_model(Path(spec.model_path))
    return Scheduler(model, max_concurrency=spec.max_concurrency, prefill_step=spec.prefill_step, max_context=spec.max_context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.worker")
    parser.add_argument("--spec", required=True, help="WorkerSpec as JSON")
    args = parser.parse_args(argv)
    spec = msgspec.json.decode(args.spec.encode(), type=WorkerSpec)
    logging.basicConfig(
        level=spec.log_level.upper(),
        format=f"%(asctime)s %(levelname)s worker[{spec.model_id}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main())
