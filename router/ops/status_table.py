"""``rapid-mlx status`` and ``rapid-mlx reload``: the admin routes, printed for a terminal."""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table


def print_status(url: str, key: str | None = None) -> int:
    """The config and a row per model (GET /admin/status), then the details worth a line."""
    reply = _call("get", url, "/admin/status", key)
    if reply is None:
        return 1
    status = reply.json()
    console = Console(soft_wrap=True)
    config = status["config"]
    console.print(f"config: {config['path'] or '(none: started without --config)'}, version {config['version']}, hash {config['hash'] or '-'}")
    last = config.get("last_reload")
    if last:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["at"]))
        console.print(f"last reload: {when} ({last['trigger']}) {'ok' if last['ok'] else 'REJECTED'}", markup=False)
        for line in last["errors"]:
            console.print(f"  {line}", markup=False)
    budget = status.get("memory_budget_bytes") or 0
    console.print(f"memory budget: {_gb(budget) if budget else 'none'}")
    table = Table(box=None, pad_edge=False)
    for column in ("MODEL", "STATE", "PID", "MEMORY", "RUNNING", "WAITING", "IDLE", "RESTARTS", "CACHE", "HIT"):
        table.add_column(column, no_wrap=True)
    for model_id, model in status["models"].items():
        table.add_row(model_id, *_row(model))
    console.print(table)
    for model_id, model in status["models"].items():
        for line in _details(model):
            console.print(f"{model_id}: {line}", markup=False)
    _print_upstreams(console, status.get("upstreams") or {})
    return 0


def _print_upstreams(console: Console, upstreams: dict[str, Any]) -> None:
    """A row per upstream model: where it is, its health and its load from this router."""
    if not upstreams:
        return
    table = Table(box=None, pad_edge=False)
    for column in ("UPSTREAM", "STATE", "URL", "MODEL", "INFLIGHT", "REQUESTS", "CHECK", "ERRORS", "FLEET"):
        table.add_column(column, no_wrap=True)
    for model_id, upstream in upstreams.items():
        latency = upstream.get("last_check_latency_ms")
        table.add_row(model_id, upstream["state"], upstream["upstream"], upstream["upstream_model"],
                      f"{upstream['inflight']}/{upstream['max_concurrency']}", str(upstream["requests"]),
                      "-" if latency is None else f"{latency:.1f} ms", str(upstream["errors"]),
                      "off" if upstream["off_fleet"] else "on")
    console.print(table)
    for model_id, upstream in upstreams.items():
        if upstream["state"] == "unreachable" and upstream.get("last_error"):
            console.print(f"{model_id}: {upstream['last_error']} (next check in {upstream['next_check_in_s']}s)", markup=False)


def request_reload(url: str, key: str | None = None) -> int:
    """POST /admin/reload; prints what changed, or the errors (exit 1)."""
    reply = _call("post", url, "/admin/reload", key, ok_statuses=(200, 400))
    if reply is None:
        return 1
    result = reply.json()
    if not result["ok"]:
        print("reload rejected; the last good config keeps serving:", file=sys.stderr)
        print("\n".join(result["errors"]), file=sys.stderr)
        return 1
    print(f"reloaded: version {result['version']}")
    for model_id, change in result["changes"].items():
        print(f"  {model_id}: {change}")
    if not result["changes"]:
        print("  no model changed")
    for field in result["needs_restart"]:
        print(f"  server.{field} changed: applies at the next restart")
    return 0


def _call(method: str, url: str, path: str, key: str | None, ok_statuses: tuple[int, ...] = (200,)) -> httpx.Response | None:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        reply = httpx.request(method, url.rstrip("/") + path, timeout=30, headers=headers)
    except httpx.HTTPError as exc:
        print(f"rapid-mlx: {url}: {exc}", file=sys.stderr)
        return None
    if reply.status_code not in ok_statuses:
        print(f"rapid-mlx: {url}{path}: HTTP {reply.status_code}: {reply.text[:500]}", file=sys.stderr)
        return None
    return reply


def _row(model: dict[str, Any]) -> list[str]:
    memory = model.get("memory")
    cache = model.get("prefix_cache")
    hit = "-" if not cache or cache["hit_ratio"] is None else f"{100 * cache['hit_ratio']:.0f}%"
    return [
        model["state"], str(model["pid"] or "-"), _gb(memory["total_bytes"]) if memory else "-",
        str(model.get("running", "-")), str(model.get("waiting", "-")), f"{model['idle_s']:.0f}s",
        str(model["restarts"]), str(cache["entries"]) if cache else "-", hit,
    ]


def _details(model: dict[str, Any]) -> list[str]:
    lines = []
    if model.get("last_error"):
        lines.append(f"last error: {model['last_error']}")
    pending = model.get("replacement")
    if pending:
        lines.append(f"reload: new worker {pending['state']} (pid {pending['pid'] or '-'})")
    for old in model.get("draining", []):
        lines.append(f"draining old worker pid {old['pid']} ({old['inflight']} in flight)")
    cache = model.get("prefix_cache")
    if cache:
        ratio = "-" if cache["hit_ratio"] is None else f"{100 * cache['hit_ratio']:.1f}%"
        lines.append(f"prefix cache: {cache['entries']} entries, {_mib(cache['bytes'])} of {_mib(cache['budget_bytes'])}, "
                     f"hit ratio {ratio} ({cache['hit_tokens']} of {cache['lookup_tokens']} prompt tokens), "
                     f"{cache['evictions']} evictions, {cache['shared_prefill_tokens']} tokens shared in flight")
    elif "running" in model:
        lines.append("prefix cache: off")
        disk = cache.get("disk")
        if disk:
            lines.append(f"on disk: {disk['entries']} entries, {_mib(disk['bytes'])} of {_mib(disk['budget_bytes'])}, "
                         f"{disk['hits']} hits ({disk['hit_tokens']} tokens), {disk['queue_depth']} queued, "
                         f"{disk['dropped_writes']} dropped, {disk['failed_writes']} failed writes")
    kv = model.get("kv_cache")
    if kv:
        precision = f"{kv['bits']}-bit" if kv["bits"] else "unquantized"
        lines.append(f"kv cache: {precision}, {_mib(kv['bytes'])} in use ({_mib(kv['quantized_bytes'])} quantized)")
    return lines


def _gb(size: int) -> str:
    return f"{size / 2**30:.2f} GB"


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
