"""Every upstream model of the config, live: created at start, followed on reload.

A reload keeps an upstream whose table did not change, and swaps in a fresh one (new client, health
from scratch) when it did; the one replaced or removed takes no new requests and closes once the
requests it carries have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping

from router.ops.config import RouterConfig
from router.ops.metrics.families import Metrics
from router.upstream.client import Upstream

__all__ = ["Upstreams"]

logger = logging.getLogger(__name__)

DRAIN_POLL_S = 0.5
STOP_WAIT_S = 5.0


class Upstreams:
    """Upstream model id → Upstream; created in the app's lifespan like the pool."""

    def __init__(self, config: RouterConfig, *, env: Mapping[str, str] | None, metrics: Metrics) -> None:
        self._env = env
        self._metrics = metrics
        self._started = False
        self._closing: set[asyncio.Task] = set()
        self.by_id: dict[str, Upstream] = {
            model_id: Upstream(model_id, model, config.server, env=self._environment(), metrics=metrics)
            for model_id, model in config.upstream_models.items()}

    def _environment(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def start(self) -> None:
        self._started = True
        for upstream in self.by_id.values():
            upstream.start()

    async def stop(self) -> None:
        if self._closing:  # replaced or removed ones still draining: a moment to close cleanly
            await asyncio.wait(list(self._closing), timeout=STOP_WAIT_S)
        for task in list(self._closing):
            task.cancel()
        await asyncio.gather(*self._closing, return_exceptions=True)
        await asyncio.gather(*(upstream.close() for upstream in self.by_id.values()))

    def get(self, model_id: str) -> Upstream | None:
        return self.by_id.get(model_id)

    def apply(self, config: RouterConfig) -> dict[str, str]:
        """Follow a reloaded config; returns upstream id → "added", "removed" or "changed"."""
        changes: dict[str, str] = {}
        live: dict[str, Upstream] = {}
        for model_id, model in config.upstream_models.items():
            old = self.by_id.get(model_id)
            if old is not None and old.same_as(model, config.server, self._environment()):
                live[model_id] = old
                continue
            upstream = Upstream(model_id, model, config.server, env=self._environment(), metrics=self._metrics)
            if self._started:
                upstream.start()
            live[model_id] = upstream
            changes[model_id] = "added" if old is None else "changed"
            if old is not None:
                self._close_when_idle(old)
        for model_id, old in self.by_id.items():
            if model_id not in live:
                changes[model_id] = "removed"
                self._close_when_idle(old)
                for family in (self._metrics.upstream_healthy, self._metrics.upstream_running):
                    # A series exists only once set: the running gauge not before a first request.
                    with contextlib.suppress(KeyError):
                        family.remove(model_id)
        self.by_id = live
        return changes

    def _close_when_idle(self, upstream: Upstream) -> None:
        async def close() -> None:
            while upstream.inflight > 0:
                await asyncio.sleep(DRAIN_POLL_S)
            await upstream.close()

        task = asyncio.create_task(close(), name=f"upstream-close[{upstream.model_id}]")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

