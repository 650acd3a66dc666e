"""Cross-model checks of the fleet a config describes: upstream references and the `local_only` promise.

"On the fleet" is decided from the config alone, never by resolving names (a DNS answer can change after
validation), and conservatively: an upstream is on the fleet only when its host is

- an IP literal that is loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7) or link-local,
- `localhost`, or a `*.local` name (mDNS: answered on the local link only),
- or listed in `[server] fleet_hosts` (names or IPs the operator vouches for, e.g. a tailnet's),

and it is not marked `cloud = true`. Everything else, hosted APIs included, is off the fleet.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .errors import dotted_path
from .schema import ModelConfig, RouterConfig, ServerConfig, UpstreamModelConfig

__all__ = ["fleet_problems", "is_off_fleet", "raw_fleet_problems"]


def is_off_fleet(upstream: UpstreamModelConfig, server: ServerConfig) -> bool:
    """Whether a request proxied to ``upstream`` would leave the team's own machines."""
    if upstream.cloud:
        return True
    host = (urlsplit(upstream.upstream).hostname or "").lower().rstrip(".")
    if host in {name.lower().rstrip(".") for name in server.fleet_hosts}:
        return False
    if host == "localhost" or host.endswith(".local"):
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return True  # a name: it could resolve anywhere
    address = getattr(address, "ipv4_mapped", None) or address
    return not (address.is_loopback or address.is_private or address.is_link_local) or address.is_global


def raw_fleet_problems(models: Any) -> list[str]:
    """Checks that read the raw tables, so they run even when fields fail: `path` and `upstream` together."""
    if not isinstance(models, Mapping):
        return []
    return [f"{dotted_path(('models', model_id))}: set exactly one of path (served here) and upstream (proxied)"
            for model_id, table in models.items() if isinstance(table, Mapping) and "path" in table and "upstream" in table]


def fleet_problems(config: RouterConfig) -> list[str]:
    """Spillover targets that are not upstreams of this file, and anything `local_only` forbids.

    Returns:
        One line per problem, each naming its TOML path.
    """
    lines: list[str] = []
    upstreams = config.upstream_models
    for model_id, model in config.models.items():
        if isinstance(model, ModelConfig):
            lines += _spillover_problems(model_id, model, upstreams, config.server)
        elif isinstance(model, UpstreamModelConfig) and is_off_fleet(model, config.server):
            why = _refusal(model.local_only, config.server.local_only, ("models", model_id, "local_only"))
            if why:
                lines.append(f"{dotted_path(('models', model_id, 'upstream'))}: {json.dumps(model.upstream)} is off the fleet "
                             f"({_off_fleet_reason(model)}) and {why}")
    return lines


def _spillover_problems(model_id: str, model: ModelConfig, upstreams: Mapping[str, UpstreamModelConfig],
                        server: ServerConfig) -> list[str]:
    lines = []
    seen: set[str] = set()
    for index, target in enumerate(model.spillover):
        where = dotted_path(("models", model_id, "spillover", index))
        if target in seen:
            lines.append(f"{where}: {json.dumps(target)} is listed twice")
        seen.add(target)
        upstream = upstreams.get(target)
        if upstream is None:
            lines.append(f"{where}: {json.dumps(target)} is not an upstream model of this file (a [models.<id>] with upstream = ...)")
            continue
        if is_off_fleet(upstream, server):
            why = _refusal(model.local_only, server.local_only, ("models", model_id, "local_only"))
            if why:
                lines.append(f"{where}: {json.dumps(target)} is off the fleet ({_off_fleet_reason(upstream)}) and {why}")
    return lines


def _refusal(model_local_only: bool, server_local_only: bool, model_path: tuple[str, ...]) -> str | None:
    if server_local_only:
        return "server.local_only is true"
    if model_local_only:
        return f"{dotted_path(model_path)} is true"
    return None


def _off_fleet_reason(upstream: UpstreamModelConfig) -> str:
    if upstream.cloud:
        return "cloud = true"
    host = urlsplit(upstream.upstream).hostname or ""
    return f"{host} is not loopback, a private or link-local IP, localhost, *.local, nor in server.fleet_hosts"
