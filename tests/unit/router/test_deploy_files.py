"""deploy/ stays true: the service files run the real command, the compose file mounts files that exist,
and the dashboard uses the datasource Grafana is provisioned with."""

from __future__ import annotations

import json
import plistlib
import shlex
from pathlib import Path

import yaml

from router.cli import main

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def test_the_systemd_unit_serves_reloads_on_sighup_and_waits_for_the_drain():
    lines = dict(line.split("=", 1) for line in (DEPLOY / "systemd" / "rapid-mlx.service").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    command = shlex.split(lines["ExecStart"])
    assert Path(command[0]).name == "rapid-mlx" and command[1:3] == ["serve", "--config"]
    assert lines["ExecReload"] == "/bin/kill -HUP $MAINPID" and lines["KillSignal"] == "SIGTERM"
    assert int(lines["TimeoutStopSec"]) > 30  # [server] drain_timeout_s defaults to 30


def test_the_launchd_agent_serves_the_config():
    plist = plistlib.loads((DEPLOY / "launchd" / "dev.rapidmlx.server.plist").read_bytes())
    arguments = plist["ProgramArguments"]
    assert Path(arguments[0]).name == "rapid-mlx" and arguments[1:3] == ["serve", "--config"]
    assert plist["ExitTimeOut"] > 30


def test_the_service_files_use_options_the_cli_has(capsys):
    # `rapid-mlx serve --config` is what both run; the parser must know it.
    try:
        main(["serve", "--help"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert "--config" in capsys.readouterr().out


def test_the_compose_file_mounts_files_that_exist():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"prometheus", "grafana"}
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./") and not source.endswith(".key"):  # the key is the operator's to write
                assert (DEPLOY / source).exists(), source


def test_the_dashboard_uses_the_provisioned_datasource_and_its_model_variable():
    dashboard = json.loads((DEPLOY / "grafana" / "rapidmlx.json").read_text())
    datasources = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uid = datasources["datasources"][0]["uid"]
    assert {panel["datasource"]["uid"] for panel in dashboard["panels"]} == {uid}
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["model_name"]
    per_model = [t["expr"] for p in dashboard["panels"] for t in p["targets"] if "rapidmlx_num_requests" in t["expr"]]
    assert per_model and all('model_name=~"$model_name"' in expr for expr in per_model)
