"""Long prefills keep bytes flowing: Anthropic pings, SSE comments for the OpenAI dialects."""

from __future__ import annotations

import httpx
import pytest

LONG_PROMPT = "tokens of a long agent system prompt " * 300


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    # Small prefill chunks make the prefill take many engine steps; a tiny keepalive interval
    # makes the gap between the request and its first token span several keepalives. No prefix
    # cache: every test must prefill its whole prompt.
    # The lazy models load on their first request: a stream opened meanwhile gets keepalives.
    lazy = {"path": str(tiny_models.path("qwen3")), "preload": False}
    return servers.start(
        {"slow": {"path": str(tiny_models.path("qwen3")), "prefill_step": 16, "prefix_cache": {"enabled": False}},
         "lazy-chat": lazy, "lazy-messages": lazy},
        server={"keepalive_s": 0.02},
    )


def raw_lines(server, path: str, body: dict) -> list[str]:
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        with http.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            return list(response.iter_lines())


def test_anthropic_stream_pings_before_the_first_block(server):
    lines = raw_lines(server, "/v1/messages", {"model": "slow", "max_tokens": 2, "stream": True,
                                              "messages": [{"role": "user", "content": LONG_PROMPT}]})
    events = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    assert events[0] == "message_start"
    first_block = events.index("content_block_start") if "content_block_start" in events else events.index("message_delta")
    assert "ping" in events[1:first_block]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "slow", "max_tokens": 2, "stream": True, "messages": [{"role": "user", "content": LONG_PROMPT}]}),
        ("/v1/responses", {"model": "slow", "max_output_tokens": 2, "stream": True, "input": LONG_PROMPT}),
    ],
)
def test_openai_streams_send_comment_keepalives(server, path, body):
    lines = raw_lines(server, path, body)
    assert ": keepalive" in lines


def test_a_stream_opened_while_its_model_loads_gets_keepalives_then_its_answer(server):
    body = {"model": "lazy-chat", "max_tokens": 2, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    lines = raw_lines(server, "/v1/chat/completions", body)
    data = [i for i, line in enumerate(lines) if line.startswith("data: ")]
    # Between the role chunk and the first token: loading takes a second or more, dozens of
    # 20 ms keepalives (a 2-token answer to "hi" alone takes a few milliseconds).
    assert lines[data[0]:data[1]].count(": keepalive") > 10, lines[:40]
    assert [line for line in lines if line][-1] == "data: [DONE]"


def test_an_anthropic_stream_pings_while_its_model_loads(server):
    lines = raw_lines(server, "/v1/messages", {"model": "lazy-messages", "max_tokens": 2, "stream": True,
                                              "messages": [{"role": "user", "content": "hi"}]})
    events = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    assert events[0] == "message_start" and events[1:11] == ["ping"] * 10, events[:12]
    assert events[-1] == "message_stop"
