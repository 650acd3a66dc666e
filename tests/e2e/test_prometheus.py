"""The shipped Prometheus config, rules and Grafana dashboard against a real Prometheus scraping a live server.

Prometheus is Debian's package (`.ci/run` installs it). Every PromQL expression of the
dashboard and the rules is evaluated through Prometheus's HTTP API after real traffic, and the
core panels must return data.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import yaml

from router.bench.targets import free_port
from tests.support.server import wait_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OPS = "sk-ops-prometheus"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
# The panels an operator reads first: they must show data after traffic.
CORE_PANELS = {"Time to first token", "Generated tokens per second", "Prefix-cache hit rate", "Requests running and waiting",
               "KV and prefix-cache memory", "Model state", "Last config reload"}


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((DEPLOY / "grafana" / "rapidmlx.json").read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def rule_queries() -> list[tuple[str, str]]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return [(rule["alert"], rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def as_instant_query(expr: str) -> str:
    """Grafana's variables, as the dashboard's defaults resolve them (all models, a 1-minute rate window)."""
    return expr.replace("$model_name", ".*").replace("$__rate_interval", "1m")


def local_config(tmp_path: Path, target: str) -> Path:
    """The shipped prometheus.yml, pointed at ``target`` with an admin key file, scraping every second."""
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    key_file = tmp_path / "rapidmlx-admin.key"
    key_file.write_text(OPS)
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    job = config["scrape_configs"][0]
    job["authorization"]["credentials_file"] = str(key_file)
    job["static_configs"] = [{"targets": [target]}]
    shutil.copy(DEPLOY / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_promtool_accepts_the_shipped_config_and_rules(tmp_path):
    assert PROMTOOL, "promtool is not installed (.ci/run installs Debian's prometheus package)"
    rules = subprocess.run([PROMTOOL, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml")], capture_output=True, text=True)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = subprocess.run([PROMTOOL, "check", "config", str(local_config(tmp_path, "127.0.0.1:8000"))], capture_output=True, text=True)
    assert config.returncode == 0, config.stdout + config.stderr


def test_every_dashboard_and_rule_expression_evaluates_against_a_live_server(servers, tiny_models, tmp_path):
    assert PROMETHEUS, "prometheus is not installed (.ci/run installs Debian's prometheus package)"
    live = servers.start({"tiny": {"path": str(tiny_models.path("qwen3"))}},
                         keys=[{"name": "ops", "key_env": "OPS_KEY", "admin": True}], env={"OPS_KEY": OPS}, ready_key=OPS)
    port = free_port()
    prometheus = subprocess.Popen(
        [PROMETHEUS, f"--config.file={local_config(tmp_path, f'127.0.0.1:{live.port}')}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))
    api = f"http://127.0.0.1:{port}/api/v1"
    stop = threading.Event()
    try:
        wait_for(lambda: _targets_up(api), timeout_s=60, what="Prometheus to scrape the server")
        traffic = threading.Thread(target=_chat_until, args=(live, stop))
        traffic.start()
        time.sleep(6)  # several scrapes with traffic in between: rates have two points
        stop.set()
        traffic.join(60)
        time.sleep(2)
        for name, expr in dashboard_queries() + rule_queries():
            reply = httpx.get(f"{api}/query", params={"query": as_instant_query(expr)}, timeout=30).json()
            assert reply["status"] == "success", (name, expr, reply)
        for title, expr in dashboard_queries():
            if title in CORE_PANELS:
                result = httpx.get(f"{api}/query", params={"query": as_instant_query(expr)}, timeout=30).json()["data"]["result"]
                assert result, f"panel {title!r} shows no data: {expr}"
        wait_for(lambda: _rules_evaluated(api), timeout_s=30, what="every alert rule to be evaluated")
    finally:
        stop.set()
        prometheus.terminate()
        prometheus.wait(30)


def _targets_up(api: str) -> bool:
    try:
        targets = httpx.get(f"{api}/targets", timeout=5).json()["data"]["activeTargets"]
    except (httpx.TransportError, ValueError, KeyError):
        return False
    return bool(targets) and all(t["health"] == "up" for t in targets)


def _rules_evaluated(api: str) -> bool:
    groups = httpx.get(f"{api}/rules", timeout=5).json()["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    return bool(rules) and all(rule["health"] == "ok" for rule in rules)


def _chat_until(live, stop: threading.Event) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "the same long system prompt " * 8}], "max_tokens": 8}
    while not stop.is_set():
        reply = httpx.post(live.base_url + "/v1/chat/completions", json=body, headers={"x-api-key": OPS}, timeout=60)
        assert reply.status_code == 200, reply.text
