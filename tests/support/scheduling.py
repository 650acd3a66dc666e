"""Driving a Scheduler by hand, as the worker's engine loop does, for integration tests."""

from __future__ import annotations

from engines.protocol import AddRequest
from engines.scheduler import Scheduler


def run_to_completion(scheduler: Scheduler, requests: list[AddRequest], max_steps: int = 2000) -> dict:
    """Add ``requests``, step until idle; each request id → (its tokens, its final delta or None)."""
    for request in requests:
        scheduler.add(request)
    tokens = {r.request_id: [] for r in requests}
    finish = {}
    for _ in range(max_steps):
        if not scheduler.has_work:
            break
        for delta in scheduler.step().outputs:
            tokens[delta.request_id] += delta.token_ids
            if delta.finish_reason is not None:
                finish[delta.request_id] = delta
    return {rid: (tokens[rid], finish.get(rid)) for rid in tokens}
