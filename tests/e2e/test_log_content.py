"""`[server] log_content = true` puts each turn's prompt and output in the log, marked with its request id."""

from __future__ import annotations

import time

import httpx


def test_log_content_logs_the_prompt_and_the_output(servers, tiny_models):
    live = servers.start({"m": {"path": str(tiny_models.path("qwen3"))}}, server={"log_content": True})
    reply = httpx.post(live.base_url + "/v1/chat/completions", timeout=120, headers={"x-request-id": "content-1"},
                       json={"model": "m", "messages": [{"role": "user", "content": "a prompt about zebras"}], "max_tokens": 3})
    assert reply.status_code == 200
    output = reply.json()["choices"][0]["message"]["content"]
    time.sleep(0.5)
    lines = [line for line in live.log().splitlines() if "[content-1]" in line]
    assert any("prompt" in line and "a prompt about zebras" in line for line in lines), lines
    # The raw text the model wrote; the answer's content is that text after the output parsers.
    assert any(": output " in line and repr(output)[1:-1] in line for line in lines), (output, lines)
