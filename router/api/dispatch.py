"""The steps every inference endpoint takes before generating, in one place."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from router.admission import admit
from router.errors import PermissionDeniedError
from router.ops.auth.guard import current_key
from router.ops.auth.keys import may_use
from router.pool import ModelHandle, ModelPool
from router.turn.turn import Turn, TurnEnd, TurnEvent


async def open_model(pool: ModelPool, name: str, *, generations: int = 1, wait: bool = True) -> ModelHandle:
    """Resolve ``name`` (404), make sure the model serves (503) and take room for the
    request's generations (429), held until its HTTP exchange ends.

    With ``wait=False`` (streams, token counting) a model that is loading is started but not
    waited for: its tokenizer is loaded, and a stream waits for the worker with keepalives
    (``Generation.stream``), so the client sees a live connection rather than silence.
    """
    while True:
        handle = allowed_model(pool, name)
        await (pool.ensure_ready(handle) if wait else pool.ensure_started(handle))
        # A reload may have replaced or removed the model while this request waited: ask again.
        if not handle.retired:
            admit(handle, generations)
            return handle


def allowed_model(pool: ModelPool, name: str) -> ModelHandle:
    """Resolve ``name`` (404) and check the request's key may use it (403)."""
    handle = pool.resolve(name)
    key = current_key.get()
    if not may_use(key, name, handle.model_id):
        raise PermissionDeniedError(f"Key {key.name!r} may not use model `{name}`.", param="model")
    return handle


async def run_whole_turn(turn: Turn, apply: Callable[[TurnEvent], object]) -> TurnEnd | None:
    """Drive a non-stream turn to its end, handing every event to ``apply``; returns the TurnEnd."""
    end = None
    async for event in turn.events():
        apply(event)
        if isinstance(event, TurnEnd):
            end = event
    return end


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())
