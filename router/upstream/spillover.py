"""When a local model's request goes to one of its `spillover` upstreams instead, and to which.

- ``queue_full``: the model has no room (it would answer 429).
- ``unavailable``: that, or its worker is loading, restarting or failed (it would answer 503).
- ``least_loaded``: both of those, and also whenever a spillover upstream is less loaded than the
  model. Load is requests in flight over ``max_concurrency``, counted by this router for both sides:
  an upstream's own queue (other clients, other fronts) is not asked for, so two fronts sharing one
  upstream each see only their own share of it.

A target is available while its health allows requests and it has room; the first available one in
``spillover`` order is tried first (least_loaded: the least loaded first).
"""

from __future__ import annotations

from dataclasses import dataclass

from router.handle import ModelHandle, ModelState
from router.upstream.client import Upstream
from router.upstream.registry import Upstreams

__all__ = ["Spill", "choose_spillover"]

_NOT_SERVING = frozenset({ModelState.LOADING, ModelState.FAILED, ModelState.DRAINING})


@dataclass(frozen=True)
class Spill:
    targets: list[Upstream]  # in the order to try them
    reason: str  # "queue_full", "unavailable" or "least_loaded"


def choose_spillover(handle: ModelHandle, upstreams: Upstreams, generations: int = 1) -> Spill | None:
    """Where ``handle``'s next request should go instead of the local worker, if anywhere."""
    config = handle.config
    if not config.spillover:
        return None
    targets = [upstream for model_id in config.spillover if (upstream := upstreams.get(model_id)) and upstream.has_room()]
    if not targets:
        return None
    if handle.inflight + generations > config.max_concurrency + config.max_queue:
        return Spill(targets, "queue_full")
    if config.spillover_when == "queue_full":
        return None
    if handle.state in _NOT_SERVING:
        return Spill(targets, "unavailable")
    if config.spillover_when == "least_loaded":
        local = handle.inflight / config.max_concurrency
        lighter = sorted((u for u in targets if _load(u) < local), key=_load)
        return Spill(lighter, "least_loaded") if lighter else None
    return None


def _load(upstream: Upstream) -> float:
    return upstream.inflight / upstream.config.max_concurrency
