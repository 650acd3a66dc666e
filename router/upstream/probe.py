"""`rapid-mlx validate --probe`: ask every upstream of a config whether it answers, once, now.

Validation itself never touches the network; the probe is asked for explicitly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import httpx

from router.ops.config import RouterConfig, is_off_fleet

__all__ = ["PROBE_TIMEOUT_S", "probe_upstreams"]

PROBE_TIMEOUT_S = 5.0


def probe_upstreams(config: RouterConfig, *, env: Mapping[str, str] | None = None) -> tuple[list[str], bool]:
    """One line per upstream model (reachable with its latency, or why not) and whether all answered.

    Any HTTP answer below 500 from ``GET <upstream>/models`` counts as reachable, as the health checks do.
    """
    env = os.environ if env is None else env
    lines, every = [], True
    for model_id, model in config.upstream_models.items():
        key = env.get(model.api_key_env) if model.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        where = f"models.{model_id}.upstream {model.upstream}" + (" (off the fleet)" if is_off_fleet(model, config.server) else "")
        started = time.perf_counter()
        try:
            with httpx.Client(timeout=min(PROBE_TIMEOUT_S, model.timeout_s), trust_env=False) as client:
                response = client.get(model.upstream.rstrip("/") + "/models", headers=headers)
        except httpx.HTTPError as exc:
            every = False
            lines.append(f"{where}: unreachable ({type(exc).__name__}: {exc})")
            continue
        elapsed_ms = (time.perf_counter() - started) * 1000
        if response.status_code >= 500:
            every = False
            lines.append(f"{where}: answered {response.status_code} in {elapsed_ms:.1f} ms")
        else:
            listed = _lists_model(response, model.upstream_model or model_id)
            lines.append(f"{where}: reachable, {response.status_code} in {elapsed_ms:.1f} ms{listed}")
    return lines, every


def _lists_model(response: httpx.Response, name: str) -> str:
    """Whether its model list names the model asked for (a hint only: some servers list nothing)."""
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(data, list):
        return ""
    ids = {entry.get("id") for entry in data if isinstance(entry, dict)}
    return f", lists {name!r}" if name in ids else f", does not list {name!r}"
