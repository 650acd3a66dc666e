"""The status page's parts without a server: the recent-traffic window, per-key usage, the HTML renderer."""

from __future__ import annotations

import pytest

from router.ops.auth.limits import KeyLimits
from router.ops.config import KeyConfig
from router.ops.metrics.recent import RecentRequests
from router.ops.ui.render import page, status_fragment


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_window_reports_ttft_percentiles_and_tokens_per_second():
    clock = Clock()
    recent = RecentRequests(window_s=60.0, clock=clock)
    clock.now += 60.0
    for ttft in [0.1 * step for step in range(1, 21)]:  # 0.1 … 2.0 s
        recent.observe("coder", ttft, tokens=30)
    summary = recent.summary("coder")
    assert summary["requests"] == 20
    assert summary["ttft_p50_s"] == pytest.approx(1.0) and summary["ttft_p95_s"] == pytest.approx(1.9)
    assert summary["output_tokens_per_s"] == pytest.approx(20 * 30 / 60.0)


def test_requests_leave_the_window_and_a_request_without_tokens_counts_without_a_ttft():
    clock = Clock()
    recent = RecentRequests(window_s=60.0, clock=clock)
    recent.observe("coder", 0.5, tokens=10)
    clock.now += 30.0
    recent.observe("coder", None, tokens=0)  # ended (an error, a disconnect) before its first token
    summary = recent.summary("coder")
    assert summary["requests"] == 2 and summary["ttft_p50_s"] == 0.5
    assert summary["output_tokens_per_s"] == pytest.approx(10 / 30.0)  # the router is younger than the window
    clock.now += 45.0
    summary = recent.summary("coder")
    assert summary["requests"] == 1 and summary["ttft_p50_s"] is None and summary["output_tokens_per_s"] == 0
    assert recent.summary("unknown")["requests"] == 0


def test_key_usage_counts_requests_the_last_minute_and_those_in_flight():
    limits = KeyLimits()
    key = KeyConfig(name="dev", key_env="DEV_KEY")
    for at in (0.0, 10.0, 50.0):
        limits.take(key, now=at)
    limits.give_back("dev")
    assert limits.usage("dev", now=65.0) == {"requests": 3, "last_minute": 2, "inflight": 2}
    assert limits.usage("nobody") == {"requests": 0, "last_minute": 0, "inflight": 0}


def status(**model_fields) -> dict:
    model = {"state": "idle", "pid": 42, "restarts": 1, "last_error": None, "memory": {"total_bytes": 3 * 2**30},
             "running": 1, "waiting": 2, "recent": {"ttft_p50_s": 0.25, "ttft_p95_s": 1.5, "output_tokens_per_s": 12.34},
             "prefix_cache": {"hit_ratio": 0.875, "bytes": 5 * 2**20, "disk": {"bytes": 7 * 2**30}}, **model_fields}
    return {
        "config": {"path": "/etc/rapidmlx.toml", "version": 3, "hash": "abc123",
                   "last_reload": {"ok": False, "trigger": "watch", "at": 0.0, "version": 3,
                                   "errors": ["rapidmlx.toml: models.coder.max_queue: Input should be a valid integer"],
                                   "changes": {}, "server_changes": [], "key_changes": {}}},
        "models": {"coder": model},
        "upstreams": {"peer": {"state": "unreachable", "upstream": "http://mac-2:8000/v1", "upstream_model": "coder",
                               "inflight": 0, "max_concurrency": 4, "requests": 9, "last_check_latency_ms": None,
                               "errors": 3, "last_error": "ConnectError: refused"}},
        "keys": {"dev": {"requests": 5, "last_minute": 1, "inflight": 0}},
    }


def test_the_fragment_shows_every_column_the_page_promises():
    html = status_fragment(status(), now=0.0)
    for shown in ("coder", "idle", "42", "3.0 GB", "250 ms", "1.50 s", "12.3", "88%", "5.0 MB", "7.0 GB",
                  "models.coder.max_queue", "rejected", "peer", "unreachable", "ConnectError: refused", "dev",
                  'data-action="unload" data-model="coder"'):
        assert shown in html, shown


def test_an_unloaded_model_offers_load_and_values_are_escaped():
    html = status_fragment(status(state="unloaded", last_error="<script>alert(1)</script>"), now=0.0)
    assert 'data-action="load"' in html and "<script>" not in html and "&lt;script&gt;" in html


def test_with_keys_the_page_carries_no_status():
    shell = page(fragment=None, keys=True)
    assert 'data-keys="on"' in shell and "<table" not in shell and "needs-key" in shell
    assert "<table" in page(fragment=status_fragment(status(), now=0.0), keys=False)


def test_a_server_without_a_config_file_offers_no_reload():
    assert 'data-action="reload"' in page(fragment="", keys=False)
    assert 'data-action="reload"' not in page(fragment="", keys=False, reloadable=False)
