"""The prefix cache on disk through live servers: a graceful restart and a SIGKILLed worker
both leave the next agent turn served from disk, with the output of a server without any
cache, for an attention model, a quantized-KV model and a hybrid model."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

pytestmark = pytest.mark.slow

SYSTEM = "You are a coding agent working in a large repository. " + "Keep every answer short and cite the files you read. " * 30
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]
MODELS = {
    "attention": ("qwen3", {}),
    "kv8": ("qwen3", {"kv_cache": {"bits": 8, "group_size": 32}}),
    "hybrid": ("qwen3_next", {"chat_template_kwargs": {"enable_thinking": False}}),
}


def turns() -> list[list[dict]]:
    """An agent session's requests: each resends the whole history."""
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Find where the router starts its workers."}]
    out = []
    for i in range(3):
        out.append(list(history))
        history += [
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "type": "function",
                                                                 "function": {"name": "read_file", "arguments": f'{{"path": "src/file{i}.py"}}'}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"# file {i}\n" + "def start_worker(spec):\n    return spawn(spec)\n" * 12},
        ]
    return out


def ask(server, model: str, messages: list[dict]) -> tuple[str, int, int]:
    """(the reply, cached tokens, prompt tokens)."""
    body = {"model": model, "messages": messages, "tools": TOOLS, "max_tokens": 12, "temperature": 0, "logit_bias": {"2": -100}}
    response = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    data = response.json()
    message = data["choices"][0]["message"]
    usage = data["usage"]
    return repr([message.get("content"), message.get("tool_calls")]), usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"]


def disk_status(server, model: str) -> dict:
    return httpx.get(server.base_url + "/admin/status", timeout=10).json()["models"][model]["prefix_cache"]["disk"]


def config(tiny_models, name: str, directory) -> dict:
    arch, options = MODELS[name]
    return {name: {"path": str(tiny_models.path(arch)), **options, "prefix_cache": {"dir": str(directory)}}}


@pytest.fixture(scope="module")
def uncached(servers, tiny_models):
    return servers.start({name: {"path": str(tiny_models.path(arch)), **options, "prefix_cache": {"enabled": False}}
                          for name, (arch, options) in MODELS.items()})


@pytest.mark.parametrize("name", list(MODELS))
def test_the_turn_after_a_graceful_restart_is_served_from_disk(name, servers, tiny_models, uncached, tmp_path):
    session = turns()
    first = servers.start(config(tiny_models, name, tmp_path))
    previous = [ask(first, name, messages)[2] for messages in session[:2]][-1]
    first.stop()  # SIGTERM: the router stops the worker, which writes what is still queued
    assert "flushed in" in first.log()
    second = servers.start(config(tiny_models, name, tmp_path))
    assert disk_status(second, name)["entries"] > 0
    text, cached, _ = ask(second, name, session[2])
    # The previous turn's prompt, less its generation prompt (and the last token a cache leaves).
    assert cached >= previous - 16 and disk_status(second, name)["hits"] == 1, (cached, previous)
    assert text == ask(uncached, name, session[2])[0]


def test_a_sigkilled_worker_comes_back_to_its_entries_on_disk(servers, tiny_models, uncached, tmp_path):
    session = turns()
    live = servers.start(config(tiny_models, "attention", tmp_path))
    previous = [ask(live, "attention", messages)[2] for messages in session[:2]][-1]
    deadline = time.monotonic() + 30
    while disk_status(live, "attention")["queue_depth"] and time.monotonic() < deadline:
        time.sleep(0.05)  # write-through: nothing is left queued for long
    os.kill(live.worker_pid("attention"), signal.SIGKILL)  # no flush, no goodbye
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the router restarts it
        state = httpx.get(live.base_url + "/admin/status", timeout=10).json()["models"]["attention"]
        if state["state"] == "idle" and state["restarts"] >= 1:
            break
        time.sleep(0.1)
    text, cached, _ = ask(live, "attention", session[2])
    assert cached >= previous - 16 and disk_status(live, "attention")["hits"] == 1, (cached, previous)
    assert text == ask(uncached, "attention", session[2])[0]
