"""Driving a Scheduler by hand, as the worker's engine loop does, for integration tests."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from engines.protocol import FRAME_HEADER, AddRequest, TokenDelta, decode_output
from engines.scheduler import Scheduler


@dataclass
class Outcome:
    tokens: list[int] = field(default_factory=list)
    last: TokenDelta | None = None  # the delta with the finish reason
    cached_tokens: int | None = None  # as the first delta reported it


def run_requests(scheduler: Scheduler, requests: list[AddRequest], max_steps: int = 2000,
                 matchers: dict | None = None) -> dict[str, Outcome]:
    """Add ``requests`` (with the grammar ``matchers`` by request id), step until idle; what each request id received."""
    for request in requests:
        scheduler.add(request, (matchers or {}).get(request.request_id))
    outcomes = {r.request_id: Outcome() for r in requests}
    for _ in range(max_steps):
        if not scheduler.has_work:
            break
        for delta in scheduler.step().outputs:
            outcome = outcomes[delta.request_id]
            outcome.tokens += delta.token_ids
            if delta.cached_tokens is not None:
                outcome.cached_tokens = delta.cached_tokens
            if delta.finish_reason is not None:
                outcome.last = delta
    return outcomes


def run_to_completion(scheduler: Scheduler, requests: list[AddRequest], max_steps: int = 2000) -> dict:
    """Add ``requests``, step until idle; each request id → (its tokens, its final delta or None)."""
    return {rid: (o.tokens, o.last) for rid, o in run_requests(scheduler, requests, max_steps).items()}


def read_outputs(sock: socket.socket) -> list:
    """Every frame a worker's engine loop wrote to ``sock`` until it went quiet or closed."""
    sock.settimeout(10)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    frames = []
    while data:
        (size,) = FRAME_HEADER.unpack(data[: FRAME_HEADER.size])
        frames.append(decode_output(data[FRAME_HEADER.size : FRAME_HEADER.size + size]))
        data = data[FRAME_HEADER.size + size :]
    return frames
