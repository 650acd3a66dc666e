"""The status page's HTML, from what ``GET /admin/status`` returns (router/ops/admin.py).

One renderer serves both paints: the page's first (server-side, readable without JavaScript)
and every refresh (``GET /ui/status`` returns the same fragment, which the script swaps in), so
the page and its updates cannot disagree. Every value from the status is escaped; the status
holds no secrets (keys appear by name only).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

MODEL_COLUMNS = ("Model", "State", "Actions", "PID", "Memory", "Running", "Waiting", "TTFT p50", "TTFT p95", "Tokens/s",
                 "Cache hit", "Cache memory", "Cache disk", "Restarts", "Last error")
UPSTREAM_COLUMNS = ("Upstream", "State", "URL", "Model", "In flight", "Requests", "Check", "Errors", "Last error")
KEY_COLUMNS = ("Key", "Requests", "Last minute", "In flight")


def status_fragment(status: dict[str, Any], *, now: float | None = None) -> str:
    """The config and its last reload, then a table each for models, upstreams and keys."""
    now = time.time() if now is None else now
    parts = [_config_section(status["config"]), _models_table(status["models"])]
    if status.get("upstreams"):
        parts.append(_upstreams_table(status["upstreams"]))
    if status.get("keys"):
        parts.append(_keys_table(status["keys"]))
    parts.append(f'<p class="updated">Updated {escape(time.strftime("%H:%M:%S", time.localtime(now)))}.</p>')
    return "\n".join(parts)


def page(*, fragment: str | None, keys: bool, reloadable: bool = True) -> str:
    """The whole page. ``fragment`` is the first paint (None when the server has keys: the status
    waits for an admin key, which only the script can send); ``reloadable``: served from a config
    file (the demo without one has nothing to reload)."""
    if fragment is None:
        body = ('<p id="needs-key">This server has API keys: enter an admin key to see its status. '
                'The key stays in this tab\'s session storage.</p>'
                '<noscript><p>With keys configured, the status page needs JavaScript to send the key.</p></noscript>')
    else:
        body = fragment
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rapid-mlx status</title>
<link rel="icon" href="/ui/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/static/status.css">
<script src="/ui/static/status.js" defer></script>
</head>
<body data-keys="{'on' if keys else 'off'}">
<header>
<h1>rapid-mlx</h1>
<div class="controls js-only">
<form id="key-form"{'' if keys else ' hidden'}>
<label for="admin-key">Admin key</label>
<input id="admin-key" name="admin-key" type="password" autocomplete="off" spellcheck="false">
<button type="submit">Use key</button>
<button type="button" id="forget-key">Forget key</button>
</form>
{'<button type="button" data-action="reload">Reload config</button>' if reloadable else ''}
</div>
</header>
<p id="result" role="status" aria-live="polite"></p>
<main id="status">
{body}
</main>
</body>
</html>
"""


def _config_section(config: dict[str, Any]) -> str:
    path = config.get("path") or "(none: started without --config)"
    lines = [f'<section id="config" aria-labelledby="config-title"><h2 id="config-title">Config</h2>',
             f'<p><code>{escape(path)}</code>, version {escape(str(config.get("version")))}'
             f'{", hash " + escape(config["hash"]) if config.get("hash") else ""}</p>']
    last = config.get("last_reload")
    if last is None:
        lines.append("<p>No reload since the server started.</p>")
    else:
        when = escape(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["at"])))
        verdict = "applied" if last["ok"] else "rejected: the last good config keeps serving"
        lines.append(f'<p id="last-reload" class="{"ok" if last["ok"] else "failed"}">Last reload ({escape(last["trigger"])}, {when}): '
                     f'{verdict}.</p>')
        if last["errors"]:
            lines.append('<pre id="reload-errors">' + escape("\n".join(last["errors"])) + "</pre>")
        changes = [f"{model}: {change}" for model, change in last.get("changes", {}).items()]
        changes += list(last.get("server_changes", [])) + [f"key {name}: {change}" for name, change in last.get("key_changes", {}).items()]
        if changes:
            lines.append("<ul>" + "".join(f"<li>{escape(change)}</li>" for change in changes) + "</ul>")
    lines.append("</section>")
    return "\n".join(lines)


def _models_table(models: dict[str, dict[str, Any]]) -> str:
    rows = [_model_row(model_id, model) for model_id, model in models.items()]
    return _table("models", "Models", MODEL_COLUMNS, rows)


def _model_row(model_id: str, model: dict[str, Any]) -> list[str]:
    recent = model.get("recent") or {}
    cache = model.get("prefix_cache") or {}
    disk = cache.get("disk") or {}
    memory = model.get("memory") or {}
    error = model.get("last_error") or model.get("status_error") or ""
    loaded = model["state"] not in ("unloaded", "failed")
    action = "unload" if loaded else "load"
    button = (f'<button type="button" class="js-only" data-action="{action}" data-model="{escape(model_id)}">'
              f'{action.capitalize()}</button>')
    return [
        f'<th scope="row">{escape(model_id)}</th>',
        f'<td class="state state-{escape(model["state"])}">{escape(model["state"])}</td>', f"<td>{button}</td>",
        _cell(model.get("pid")), _cell(_bytes(memory.get("total_bytes") or memory.get("configured_bytes"))),
        _cell(model.get("running")), _cell(model.get("waiting")),
        _cell(_seconds(recent.get("ttft_p50_s"))), _cell(_seconds(recent.get("ttft_p95_s"))),
        _cell(_rate(recent.get("output_tokens_per_s"))),
        _cell(_ratio(cache.get("hit_ratio"))), _cell(_bytes(cache.get("bytes"))), _cell(_bytes(disk.get("bytes"))),
        _cell(model.get("restarts")), f'<td class="error">{escape(error)}</td>',
    ]


def _upstreams_table(upstreams: dict[str, dict[str, Any]]) -> str:
    rows = []
    for model_id, upstream in upstreams.items():
        latency = upstream.get("last_check_latency_ms")
        rows.append([
            f'<th scope="row">{escape(model_id)}</th>',
            f'<td class="state state-{escape(upstream["state"])}">{escape(upstream["state"])}</td>',
            _cell(upstream["upstream"]), _cell(upstream["upstream_model"]),
            _cell(f'{upstream["inflight"]}/{upstream["max_concurrency"] or "∞"}'), _cell(upstream["requests"]),
            _cell(None if latency is None else f"{latency:.1f} ms"), _cell(upstream["errors"]),
            f'<td class="error">{escape(upstream.get("last_error") or "")}</td>',
        ])
    return _table("upstreams", "Upstreams", UPSTREAM_COLUMNS, rows)


def _keys_table(keys: dict[str, dict[str, int]]) -> str:
    rows = [[f'<th scope="row">{escape(name)}</th>', _cell(usage["requests"]), _cell(usage["last_minute"]), _cell(usage["inflight"])]
            for name, usage in keys.items()]
    return _table("keys", "Requests per key", KEY_COLUMNS, rows)


def _table(table_id: str, title: str, columns: Sequence[str], rows: Iterable[list[str]]) -> str:
    head = "".join(f'<th scope="col">{escape(column)}</th>' for column in columns)
    body = "\n".join(f'<tr>{"".join(cells)}</tr>' for cells in rows)
    # The wrapper scrolls sideways in a narrow window instead of squeezing the columns.
    return (f'<section aria-labelledby="{table_id}-title"><h2 id="{table_id}-title">{escape(title)}</h2>'
            f'<div class="scroll"><table id="{table_id}"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div></section>')


def _cell(value: Any) -> str:
    return f"<td>{'–' if value is None else escape(str(value))}</td>"


def _bytes(size: int | None) -> str | None:
    if not size:
        return None if size is None else "0"
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _seconds(value: float | None) -> str | None:
    if value is None:
        return None
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _rate(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str | None:
    return None if value is None else f"{value:.0%}"
