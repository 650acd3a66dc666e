"""The steps every inference endpoint takes before generating, in one place."""

from __future__ import annotations

import time
import uuid

from router.pool import ModelHandle, ModelPool


async def open_model(pool: ModelPool, name: str) -> ModelHandle:
    """Resolve ``name`` (404), make sure the model serves (503) and has room (429)."""
    handle = pool.resolve(name)
    await pool.ensure_ready(handle)
    pool.check_capacity(handle)
    return handle


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())
