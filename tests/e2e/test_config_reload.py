"""Edit rapidmlx.toml and the live server follows: exactly what changed, nobody's stream dropped."""

from __future__ import annotations

import json
import os
import threading
import time

import httpx
import pytest
import tomli_w

from tests.support.server import wait_for

EOS_BLOCK = {"2": -100}


def chat(model: str, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **fields}


class HeldStream:
    """A streaming chat request that reads its first chunk, then waits to be released before reading
    the rest: its HTTP exchange stays open across whatever the test does meanwhile."""

    def __init__(self, base_url: str, model: str, max_tokens: int = 64) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.chunks: list[dict] = []
        self.error: BaseException | None = None
        body = chat(model, max_tokens=max_tokens, logit_bias=EOS_BLOCK, stream=True)
        self._thread = threading.Thread(target=self._run, args=(base_url, body), daemon=True)
        self._thread.start()
        assert self.started.wait(60), "the stream did not start"

    def _run(self, base_url: str, body: dict) -> None:
        try:
            with httpx.stream("POST", base_url + "/v1/chat/completions", json=body, timeout=120) as response:
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        self.chunks.append(json.loads(line[6:]))
                        if not self.started.is_set():
                            self.started.set()
                            self.release.wait(120)
                    elif line == "data: [DONE]":
                        self.chunks.append({"done": True})
        except BaseException as exc:  # handed to the test thread by finish()
            self.error = exc
            self.started.set()

    def finish(self) -> list[dict]:
        """Release the stream, wait for its end; the chunks (the last one the [DONE] marker)."""
        self.release.set()
        self._thread.join(120)
        if self.error is not None:
            raise self.error
        return self.chunks


def completed(chunks: list[dict]) -> bool:
    """The stream ended as a client expects: one finish reason (max_tokens: EOS is blocked), then [DONE]."""
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices") and c["choices"][0].get("finish_reason")]
    return chunks[-1] == {"done": True} and finish == ["length"]


# Decoding this many takes the tiny model ~10 s here: the stream is still generating when the
# reload's new worker takes over (~2 s), so its request is in flight on the old worker.
LONG = 3500


def model_status(live, model_id: str) -> dict:
    return live.status()["models"][model_id]


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    return servers.start({
        "alpha": {"path": str(tiny_models.path("qwen3")), "aliases": ["first"], "max_concurrency": 4},
        "beta": {"path": str(tiny_models.path("llama")), "preload": False},
    })


def base_models(tiny_models) -> dict[str, dict]:
    return {
        "alpha": {"path": str(tiny_models.path("qwen3")), "aliases": ["first"], "max_concurrency": 4},
        "beta": {"path": str(tiny_models.path("llama")), "preload": False},
    }


def reloaded_version(live, after: int) -> int:
    return wait_for(lambda: (v := live.status()["config"]["version"]) > after and v, what="a new config version")


def test_router_only_change_applies_live_with_the_same_worker(server, tiny_models):
    http = httpx.Client(base_url=server.base_url, timeout=60)
    pid, version = model_status(server, "alpha")["pid"], server.status()["config"]["version"]
    held = HeldStream(server.base_url, "alpha")
    models = base_models(tiny_models)
    assert model_status(server, "alpha")["reasoning_parser"] == "qwen3"  # detected from its chat template
    models["alpha"] |= {"aliases": ["second"], "sampling": {"max_tokens": 3}, "reasoning_parser": "none"}
    server.write_config(models)
    reloaded_version(server, version)
    assert model_status(server, "alpha")["reasoning_parser"] is None
    # The alias moved, the sampling default applies to requests that set no max_tokens.
    assert http.post("/v1/chat/completions", json=chat("first")).status_code == 404
    reply = http.post("/v1/chat/completions", json={"model": "second", "messages": [{"role": "user", "content": "hi"}],
                                                    "logit_bias": EOS_BLOCK})
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 3, reply.text
    assert completed(held.finish())
    assert model_status(server, "alpha")["pid"] == pid
    last = server.status()["config"]["last_reload"]
    assert last["ok"] and last["trigger"] == "watch" and last["changes"] == {"alpha": "router: aliases, reasoning_parser, sampling.max_tokens"}
    server.write_config(base_models(tiny_models))
    wait_for(lambda: http.post("/v1/chat/completions", json=chat("first")).status_code == 200, what="the alias back")


def test_engine_change_starts_a_new_worker_and_drains_the_old(server, tiny_models):
    http = httpx.Client(base_url=server.base_url, timeout=60)
    old_pid = model_status(server, "alpha")["pid"]
    streams = [HeldStream(server.base_url, "alpha", max_tokens=LONG) for _ in range(2)]
    models = base_models(tiny_models)
    models["alpha"] |= {"max_concurrency": 2, "kv_cache": {"bits": 8, "group_size": 32}}
    server.write_config(models)
    new_pid = wait_for(lambda: (p := model_status(server, "alpha")["pid"]) != old_pid and p, what="the new worker")
    status = model_status(server, "alpha")
    # The old worker still serves the held streams and takes nothing new.
    assert status["draining"] == [{"pid": old_pid, "inflight": 2}], status
    assert os.kill(old_pid, 0) is None
    reply = http.post("/v1/chat/completions", json=chat("alpha"))
    assert reply.status_code == 200
    assert model_status(server, "alpha")["kv_cache"]["bits"] == 8  # answered by the new worker
    for stream in streams:
        assert completed(stream.finish())
    wait_for(lambda: not _alive(old_pid), what="the old worker to exit")
    assert model_status(server, "alpha")["draining"] == []
    assert server.status()["config"]["last_reload"]["changes"] == {"alpha": "engine: max_concurrency, kv_cache.bits, kv_cache.group_size"}
    assert new_pid != old_pid


def test_an_invalid_file_changes_nothing_and_fixing_it_recovers(server, tiny_models):
    http = httpx.Client(base_url=server.base_url, timeout=60)
    pid, version = model_status(server, "alpha")["pid"], server.status()["config"]["version"]
    good = server.config_path.read_text()

    server.config_path.write_text(good + "\n[models.alpha\n")  # a syntax error
    last = wait_for(lambda: (r := server.status()["config"]["last_reload"]) and not r["ok"] and r, what="a rejected reload")
    assert any("line" in line for line in last["errors"]), last
    assert http.post("/v1/chat/completions", json=chat("alpha")).status_code == 200

    broken = base_models(tiny_models)
    broken["alpha"]["max_concurrency"] = 0
    server.write_config(broken)
    reply = server.admin("/admin/reload", "POST")
    assert reply.status_code == 400
    body = reply.json()
    assert body["ok"] is False and any(line.startswith("models.alpha.max_concurrency:") for line in body["errors"]), body
    assert "models.alpha.max_concurrency" in body["error"]["message"]
    assert server.status()["config"]["last_reload"]["errors"] == body["errors"]
    assert http.post("/v1/chat/completions", json=chat("alpha")).status_code == 200
    assert model_status(server, "alpha")["pid"] == pid and server.status()["config"]["version"] == version

    server.write_config(base_models(tiny_models))
    wait_for(lambda: server.status()["config"]["last_reload"]["ok"], what="the fixed file to load")
    assert model_status(server, "alpha")["pid"] == pid


def test_a_removed_model_finishes_its_stream_then_answers_404_and_an_added_one_serves(server, tiny_models):
    http = httpx.Client(base_url=server.base_url, timeout=60)
    assert http.post("/v1/chat/completions", json=chat("beta")).status_code == 200  # loads it
    beta_pid = model_status(server, "beta")["pid"]
    held = HeldStream(server.base_url, "beta", max_tokens=LONG)
    models = base_models(tiny_models)
    del models["beta"]
    models["gamma"] = {"path": str(tiny_models.path("qwen3"))}
    server.write_config(models)
    wait_for(lambda: "beta" not in server.status()["models"], what="beta to go")
    assert http.post("/v1/chat/completions", json=chat("beta")).status_code == 404
    assert _alive(beta_pid)  # still draining its stream
    assert completed(held.finish())
    wait_for(lambda: not _alive(beta_pid), what="beta's worker to exit")
    wait_for(lambda: model_status(server, "gamma")["state"] == "idle", what="gamma to preload")
    assert http.post("/v1/chat/completions", json=chat("gamma")).status_code == 200
    server.write_config(base_models(tiny_models))
    wait_for(lambda: "gamma" not in server.status()["models"], what="gamma to go")


def test_sighup_and_the_cli_reload(server, tiny_models):
    import signal
    import subprocess
    import sys

    version = server.status()["config"]["version"]
    models = base_models(tiny_models)
    models["alpha"]["aliases"] = ["first", "by-signal"]
    # Written without the watcher noticing first? It may; SIGHUP must work either way.
    server.write_config(models)
    server.process.send_signal(signal.SIGHUP)
    reloaded_version(server, version)
    assert httpx.post(server.base_url + "/v1/chat/completions", json=chat("by-signal"), timeout=60).status_code == 200
    done = subprocess.run([sys.executable, "-m", "router.cli", "reload", "--url", server.base_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "reloaded: version" in done.stdout, done.stderr
    done = subprocess.run([sys.executable, "-m", "router.cli", "status", "--url", server.base_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "alpha" in done.stdout and "idle" in done.stdout and "last reload" in done.stdout, done.stdout
    server.write_config(base_models(tiny_models))


def test_saving_by_rename_and_through_a_symlink_are_both_picked_up(servers, tiny_models):
    models = {"solo": {"path": str(tiny_models.path("qwen3"))}}
    live = servers.start(models, symlink=True)
    target = live.config_path.resolve()
    version = live.status()["config"]["version"]
    # An editor's atomic save: a temp file in the target's directory renamed over it.
    edited = {**live.config, "models": {"solo": {**models["solo"], "aliases": ["renamed"]}}}
    temporary = target.with_name(".v1.toml.tmp")
    temporary.write_text(tomli_w.dumps(edited))
    os.replace(temporary, target)
    version = reloaded_version(live, version)
    assert live.status()["models"]["solo"]["aliases"] == ["renamed"]
    # The link retargeted to a new file (how Kubernetes swaps a configmap).
    second = target.with_name("v2.toml")
    second.write_text(tomli_w.dumps({**live.config, "models": {"solo": {**models["solo"], "aliases": ["relinked"]}}}))
    link_tmp = live.config_path.with_name(".link.tmp")
    link_tmp.symlink_to(second)
    os.replace(link_tmp, live.config_path)
    reloaded_version(live, version)
    assert live.status()["models"]["solo"]["aliases"] == ["relinked"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by the router) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
