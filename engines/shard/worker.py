"""Process entry of every rank of a sharded model: ``python -m engines.shard.worker --model-id ID``,
started by ``mlx.launch`` (engines/shard/launch.py), which sets the rank and the group's hosts.

Rank 0 is the worker the router knows: it reads the ``WorkerSpec`` from the environment,
connects and greets the router as ``engines.worker`` does, and hands the spec (without its
token) to the other ranks over the group, so a rank on another host needs nothing but the
checkpoint at the same path. Then every rank loads its share and runs ``ShardLoop``.

Dying together: a rank that fails exits non-zero, ``mlx.launch`` then terminates the others,
and the router, seeing rank 0's connection or the launcher end, kills the whole process group
and starts a new one. SIGTERM keeps its default action here: a rank blocked in a collective
never returns to Python to run a handler, so a handler would leave it hanging.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import msgspec

from engines.protocol import (
    PROTOCOL_VERSION,
    SPEC_ENV,
    AbortRequest,
    AddRequest,
    ErrorKind,
    Shutdown,
    StatusQuery,
    StepOutputs,
    WorkerFatal,
    WorkerInput,
    WorkerReady,
    WorkerSpec,
    encode_frame,
)
from engines.shard.doorbell import Doorbell, DoorbellClosedError, open_doorbell
from engines.shard.lockstep import Lockstep, StepInput
from engines.worker import EXIT_NOT_MY_ROUTER, greet_router, read_inputs

logger = logging.getLogger("engines.shard.worker")

# While idle, rank 0 looks for inputs this often. Without a doorbell it also shares an empty
# step each time, so the other ranks never sit in one collective for hours.
IDLE_TICK_S = 1.0


class ShardLoop:
    """The lockstep engine loop: rank 0 decides, every rank applies the same inputs, every rank steps.

    ``sock`` and ``inbox`` only on rank 0 (the router's connection and the reader thread's queue).
    A failed step is fatal here: rebuilding one rank's engine while the others go on would
    split the group, so the step's exception ends the process and the group restarts.
    """

    def __init__(self, scheduler, lockstep: Lockstep, grammars, *, inbox: queue.Queue[WorkerInput] | None = None,
                 sock: socket.socket | None = None, doorbell: Doorbell | None = None) -> None:
        self._scheduler = scheduler
        self._lockstep = lockstep
        self._doorbell = doorbell
        self._grammars = grammars
        self._inbox = inbox
        self._sock = sock
        self._running = True

    def run(self) -> None:
        dozing = False  # the other ranks wait on the doorbell (engines/shard/doorbell.py)
        leader = self._lockstep.leader
        while self._running:
            taken = self._take_inputs() if leader else None
            if dozing:
                if leader and not taken:
                    continue  # nothing to wake them for
                if leader:
                    self._doorbell.ring()
                else:
                    self._doorbell.doze()
            inputs = self._lockstep.share_inputs(taken)
            for message in inputs:
                self._apply(message)
            if self._running and self._scheduler.has_work:
                outputs = self._scheduler.step()
                if leader:
                    self._send(outputs)
            # Every rank shares the same inputs and state, so all reach the same verdict.
            dozing = self._doorbell is not None and not inputs and not self._scheduler.has_work

    def _take_inputs(self) -> list[StepInput]:
        """Rank 0: what arrived since the last step (waiting up to IDLE_TICK_S when idle);
        status queries are answered here, they change nothing the other ranks hold."""
        taken: list[StepInput] = []
        try:
            message = self._inbox.get_nowait() if self._scheduler.has_work else self._inbox.get(timeout=IDLE_TICK_S)
        except queue.Empty:
            return taken
        while True:
            if isinstance(message, StatusQuery):
                self._send_frame(self._scheduler.status())
            elif isinstance(message, AddRequest):
                taken.append(_with_seed(message))
            elif isinstance(message, (AbortRequest, Shutdown)):
                taken.append(message)
            else:
                logger.warning("ignoring %s from the router", type(message).__name__)
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return taken

    def _apply(self, message: StepInput) -> None:
        from engines.grammar import GrammarError

        if isinstance(message, Shutdown):
            self._running = False
        elif isinstance(message, AddRequest) and message.grammar:
            # Compiled here, on every rank alike, rather than on a thread: the request must
            # join every rank's batch at the same step.
            try:
                matcher = self._grammars.matcher(message.grammar)
            except GrammarError as exc:
                self._scheduler.reject(message.request_id, f"the grammar does not compile: {exc}", ErrorKind.INVALID_REQUEST)
                return
            self._scheduler.add(message, matcher)
        elif isinstance(message, AddRequest):
            self._scheduler.add(message)
        else:
            self._scheduler.abort(list(message.request_ids))

    def _send(self, outputs: StepOutputs) -> None:
        if outputs.outputs:
            self._send_frame(outputs)

    def _send_frame(self, message) -> None:
        try:
            self._sock.sendall(encode_frame(message))
        except OSError:
            logger.warning("router connection lost; stopping the group")
            self._inbox.put(Shutdown())


def _with_seed(request: AddRequest) -> AddRequest:
    """A sampled request without a seed gets one: every rank must draw the same tokens, and
    each rank's process-wide random state is its own."""
    sampling = request.sampling
    if sampling.seed is not None or sampling.temperature == 0:
        return request
    seed = int.from_bytes(os.urandom(8), "little")
    return msgspec.structs.replace(request, sampling=msgspec.structs.replace(sampling, seed=seed))


def _build_scheduler(spec: WorkerSpec, group):
    from engines.kv_quantization import checked_kv_settings
    from engines.scheduler import Scheduler
    from engines.shard.load import load_shard

    model = load_shard(Path(spec.model_path), spec.shard.mode, group)
    quantization = checked_kv_settings(model, spec)
    # No prefix cache: its byte budget and disk hits would differ between ranks holding
    # different layers, and one rank reusing a prefix another prefills splits the group.
    # A prefill share of 1 keeps the prefill budget off timings, which differ between ranks too.
    return Scheduler(model, max_concurrency=spec.max_concurrency, prefill_step=spec.prefill_step, max_context=spec.max_context,
                     kv_quantization=quantization, kv_window=spec.kv_window, prefill_share=1.0)


def _exit_with_launcher() -> None:
    """Exit if ``mlx.launch`` goes away (killed on its own): a rank must never outlive its group."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()


def _share_spec(lockstep: Lockstep, spec: WorkerSpec | None) -> WorkerSpec | None:
    """Rank 0's spec on every rank, without the token (a secret of rank 0 and the router);
    None when rank 0 gave up before loading."""
    payload = None
    if lockstep.leader:
        payload = b"" if spec is None else msgspec.msgpack.encode(msgspec.structs.replace(spec, token=""))
    shared = lockstep.share_bytes(payload)
    if not shared:
        return None
    return spec if lockstep.leader else msgspec.msgpack.decode(shared, type=WorkerSpec)


def serve(group, spec: WorkerSpec | None) -> int:
    """Run one rank until the group is told to stop; ``spec`` on rank 0 only."""
    lockstep = Lockstep(group)
    sock = None
    if lockstep.leader:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(spec.socket_path)
        except OSError as exc:  # the router stopped listening (it stopped, or gave up on this start)
            logger.error("cannot reach the router at %s: %s; exiting", spec.socket_path, exc)
            _share_spec(lockstep, None)
            return 1
        if not greet_router(sock, spec.token):
            logger.error("the listener at %s is not the router that started this group; exiting", spec.socket_path)
            sock.close()
            _share_spec(lockstep, None)
            return EXIT_NOT_MY_ROUTER
    spec = _share_spec(lockstep, spec)
    if spec is None:
        return 0
    _configure_logging(spec, lockstep.rank)
    try:
        scheduler = _build_scheduler(spec, group)
    except Exception as exc:  # process boundary: report why, then die (the launcher ends the others)
        logger.error("failed to load %s", spec.model_path, exc_info=True)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.sendall(encode_frame(WorkerFatal(f"failed to load model {spec.model_id!r} (rank {lockstep.rank}): {exc}")))
        return 1
    from engines.grammar import GrammarCompiler

    try:
        doorbell = open_doorbell(lockstep)
    except OSError as exc:  # a rank that cannot reach rank 0 (or one that never connected): the group goes
        logger.error("doorbell: %s; exiting so the router restarts the group", exc)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.sendall(encode_frame(WorkerFatal(f"the ranks of {spec.model_id!r} could not connect: {exc}")))
        return 1
    grammars = GrammarCompiler(Path(spec.model_path), vocab_size=scheduler.vocab_size)
    inbox: queue.Queue[WorkerInput] | None = None
    if lockstep.leader:
        inbox = queue.Queue()
        threading.Thread(target=read_inputs, args=(sock, inbox), name="reader", daemon=True).start()
        sock.sendall(encode_frame(WorkerReady(PROTOCOL_VERSION, spec.model_id, spec.max_context, os.getpid(), scheduler.vocab_size)))
        logger.info("ready: %s on %d ranks (%s mode, %s backend)", spec.model_id, lockstep.size, spec.shard.mode, spec.shard.backend)
    loop = ShardLoop(scheduler, lockstep, grammars, inbox=inbox, sock=sock, doorbell=doorbell)
    try:
        loop.run()
    except DoorbellClosedError:
        logger.error("rank 0 is gone; exiting")
        return 1
    except Exception as exc:  # a failed step: this rank cannot go on alone, so the group goes
        logger.error("engine step failed; exiting so the router restarts the group", exc_info=True)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.sendall(encode_frame(WorkerFatal(f"engine step failed on rank {lockstep.rank}: {type(exc).__name__}")))
        return 1
    finally:
        grammars.close()
    if doorbell is not None:
        doorbell.close()
    scheduler.close()
    if sock is not None:
        sock.close()
    return 0


def _configure_logging(spec: WorkerSpec, rank: int) -> None:
    logging.basicConfig(
        level=spec.log_level.upper(),
        format=f"%(asctime)s %(levelname)s worker[{spec.model_id} rank {rank}] %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.shard.worker",
                                     description=f"One rank of a sharded model; rank 0 reads its WorkerSpec from ${SPEC_ENV}.")
    parser.add_argument("--model-id", required=True)  # for `ps`; the spec is the authority
    parser.add_argument("--backend", default="ring", choices=("ring", "jaccl"))
    args = parser.parse_args(argv)
    # Every local rank inherits the router's environment; only rank 0 may keep the spec.
    spec_json = os.environ.pop(SPEC_ENV, None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # stops are the router's to order (as engines.worker)
    _exit_with_launcher()
    import mlx.core as mx

    group = mx.distributed.init(strict=True, backend=args.backend)
    mx.random.seed(0)  # the same process-wide state on every rank (requests carry their own seeds)
    spec = None
    if group.rank() == 0:
        if spec_json is None:
            parser.error(f"${SPEC_ENV} is not set")
        spec = msgspec.json.decode(spec_json.encode(), type=WorkerSpec)
        _configure_logging(spec, 0)
    return serve(group, spec)


if __name__ == "__main__":
    sys.exit(main())
