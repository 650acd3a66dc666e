"""The real Claude Code and Codex CLIs against ``rapid-mlx serve`` with no config, as the README says.

The CLIs come from the npm registry (``.ci/run`` installs pinned versions into ``.ci/agents``;
``RAPIDMLX_AGENT_CLIS`` names another ``node_modules/.bin``). Each CLI runs one turn against
the demo model, started from a clean environment (nothing preloaded, a fresh runtime dir, so
the prefix cache is cold and the BLAS preload is the server's own doing). Each CLI's request
bodies are also captured (the CLI pointed at a recorder that refuses them) and replayed
through the live server, streamed, as the CLI sends them. Times are printed, not asserted:
speed belongs to benchmarks (docs/benchmarks.md records them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from router.bench.targets import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("RAPIDMLX_AGENT_CLIS", REPO / ".ci" / "agents" / "node_modules" / ".bin"))
CLAUDE, CODEX = BIN / "claude", BIN / "codex"
# Generous: a cold 73k-token Claude Code prompt takes about 10 s on an idle 2-core machine with
# the demo's 1024-token KV window (164 s to the first token without it), more when it is busy.
TURN_TIMEOUT_S = 600
# What the CLIs' model names look like: the demo answers to any name when served without a config.
CLAUDE_MODEL, CODEX_MODEL = "claude-sonnet-4-5", "gpt-5-codex"


def _needs(cli: Path):
    return pytest.mark.skipif(not cli.exists(), reason=f"{cli.name} is not installed at {cli} (.ci/run installs it from npm)")


def _report(what: str, seconds: float, detail: str = "") -> None:
    sys.__stdout__.write(f"\n[agent-cli] {what}: {seconds:.1f} s {detail}\n")
    sys.__stdout__.flush()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``rapid-mlx serve`` with no config: the demo model on a free port, from a clean environment."""
    root = tmp_path_factory.mktemp("agent-clis")
    port = free_port()
    env = {**os.environ, "LD_PRELOAD": "", "XDG_RUNTIME_DIR": str(root / "run"), "PYTHONUNBUFFERED": "1"}
    (root / "run").mkdir(mode=0o700)
    log_path = root / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port)],
                                   stdout=log, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(base_url + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.3)
        else:
            raise RuntimeError(f"demo server not ready:\n{log_path.read_text(errors='replace')}")
        yield base_url, root, log_path
    finally:
        process.terminate()
        process.wait(timeout=60)


class _Recorder(BaseHTTPRequestHandler):
    """Keeps each POST body and refuses it (400, no retry), so the CLI stops after its first request."""

    bodies: list[tuple[str, dict]]

    def do_HEAD(self):  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.end_headers()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append((self.path, body))
        refusal = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "recorded"}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(refusal)))
        self.end_headers()
        self.wfile.write(refusal)

    def log_message(self, *args):  # quiet
        return


def _recorded_bodies(run_cli) -> list[tuple[str, dict]]:
    bodies: list[tuple[str, dict]] = []
    handler = type("Recorder", (_Recorder,), {"bodies": bodies})
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    try:
        run_cli(f"http://127.0.0.1:{recorder.server_address[1]}", timeout_s=120)
    finally:
        recorder.shutdown()
    return [(path, body) for path, body in bodies if path.split("?")[0] in ("/v1/messages", "/v1/responses")]


def _claude(home: Path):
    def run(base_url: str, *, timeout_s: float = TURN_TIMEOUT_S) -> subprocess.CompletedProcess:
        home.mkdir(exist_ok=True)
        # The README's line: ANTHROPIC_BASE_URL=... ANTHROPIC_AUTH_TOKEN=unused claude
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": base_url,
               "ANTHROPIC_AUTH_TOKEN": "unused", "ANTHROPIC_MODEL": CLAUDE_MODEL}
        return subprocess.run([str(CLAUDE), "-p", "hi"], env=env, cwd=home, capture_output=True, text=True, timeout=timeout_s)
    return run


def _codex(home: Path):
    def run(base_url: str, *, timeout_s: float = TURN_TIMEOUT_S) -> subprocess.CompletedProcess:
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        # The README's ~/.codex/config.toml.
        (home / ".codex" / "config.toml").write_text(
            f'model = "{CODEX_MODEL}"\nmodel_provider = "local"\n\n'
            f'[model_providers.local]\nname = "rapid-mlx"\nbase_url = "{base_url}/v1"\nwire_api = "responses"\n')
        env = {"PATH": os.environ["PATH"], "HOME": str(home)}
        return subprocess.run([str(CODEX), "exec", "--skip-git-repo-check", "Say hello."], env=env, cwd=home,
                              capture_output=True, text=True, timeout=timeout_s)
    return run


def _one_turn(run_cli, base_url: str, log_path: Path, name: str) -> None:
    logged = len(log_path.read_text(errors="replace").splitlines())
    started = time.monotonic()
    try:
        done = run_cli(base_url)
    except subprocess.TimeoutExpired:
        done = None
    elapsed = time.monotonic() - started
    lines = log_path.read_text(errors="replace").splitlines()[logged:]
    requests = [line for line in lines if "uvicorn.access" in line and "POST /v1/" in line]
    turns = [line.split(": ", 1)[-1] for line in lines if "prompt tokens" in line]
    outcome = "timed out" if done is None else f"exit {done.returncode}"
    _report(f"{name}, one turn", elapsed, f"({outcome}; {len(requests)} requests; server: {'; '.join(turns) or 'no turn'})")
    # The server's side: every request the CLI sent was answered, and its turns ended.
    assert requests and all(line.rstrip().endswith(" 200") for line in requests), requests
    assert turns and all("finish" in turn and "finish length" not in turn for turn in turns), turns  # ended by the model
    # The CLI's side: it finished its turn and printed the answer.
    assert done is not None and done.returncode == 0, f"{name} failed:\n{done and done.stdout}\n{done and done.stderr}"
    assert done.stdout.strip(), f"{name} printed no answer:\n{done.stderr}"


def _replay(base_url: str, path: str, body: dict) -> tuple[str, float]:
    """Send a recorded body as the CLI did (streamed); the last event's stop reason, and the time to it."""
    started = time.monotonic()
    final, blocks = None, 0
    with httpx.stream("POST", base_url + path, json=body, timeout=TURN_TIMEOUT_S,
                      headers={"x-api-key": "unused", "anthropic-version": "2023-06-01"}) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[6:])
                blocks += event.get("type") == "content_block_start"
                if event.get("type") in ("message_delta", "response.completed", "response.incomplete"):
                    final = event
    assert final is not None, "the stream never ended its message"
    if final["type"] == "message_delta":
        assert blocks, "the message has no content block (text or tool_use)"
        reason = final["delta"]["stop_reason"]
    else:
        output = final["response"]["output"]
        assert output, final
        reason = final["response"]["status"] + ":" + ",".join(item["type"] for item in output)
    return reason, time.monotonic() - started


# name, binary, how to run it, the model name it sends, how a replayed stream may end (Messages /
# Responses): by the model's own choice, a reply or a call, not cut by the demo's 512-token ceiling.
AGENTS = {
    "claude-code": (CLAUDE, _claude, CLAUDE_MODEL, {"end_turn", "tool_use"}),
    "codex": (CODEX, _codex, CODEX_MODEL, {"completed"}),
}


@pytest.mark.parametrize("agent", [pytest.param(name, marks=_needs(spec[0])) for name, spec in AGENTS.items()])
def test_agent_cli_finishes_a_turn_and_its_requests_replay(demo, tmp_path, agent):
    _, make_runner, model, clean_ends = AGENTS[agent]
    base_url, _, log_path = demo
    run = make_runner(tmp_path / "home")
    _one_turn(run, base_url, log_path, agent)
    bodies = _recorded_bodies(run)
    assert bodies and all(body["model"] == model and body["tools"] for _, body in bodies)
    for path, body in bodies:
        reason, seconds = _replay(base_url, path, body)
        _report(f"{agent} body replayed ({len(json.dumps(body)) // 1000}k chars, {len(body['tools'])} tools)", seconds, reason)
        assert reason.split(":")[0] in clean_ends, reason
