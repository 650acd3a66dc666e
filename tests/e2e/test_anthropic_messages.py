"""Anthropic Messages through the official anthropic SDK (strict) and raw SSE frames."""

from __future__ import annotations

import anthropic
import httpx
import pytest
from httpx_sse import connect_sse

EOS_BLOCK_NOTE = "the tiny model emits EOS at random; tests that need exact lengths use max_tokens small enough"


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    path = str(tiny_models.path("qwen3"))
    return servers.start({
        "coder": {"path": path, "aliases": ["claude-*"], "sampling": {"temperature": 0.0}},
        "short": {"path": path, "max_context": 96},
    })


@pytest.fixture
def client(server) -> anthropic.Anthropic:
    return server.anthropic()


HELLO = [{"role": "user", "content": "hello there"}]


def test_create_returns_a_message(client):
    message = client.messages.create(model="claude-opus-5-5", max_tokens=6, messages=HELLO)
    assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    assert message.model == "claude-opus-5-5"
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and 0 < message.usage.output_tokens <= 6
    assert all(block.type == "text" for block in message.content)


def test_stream_matches_create_and_counts(client):
    whole = client.messages.create(model="coder", max_tokens=8, messages=HELLO)
    with client.messages.stream(model="coder", max_tokens=8, messages=HELLO) as stream:
        final = stream.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in whole.content]
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.stop_reason == whole.stop_reason


def test_count_tokens_matches_usage(client):
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    counted = client.messages.count_tokens(model="coder", system=system, messages=HELLO)
    created = client.messages.create(model="coder", system=system, max_tokens=1, messages=HELLO)
    # input_tokens leaves out what was read from the prefix cache, as Anthropic's does.
    assert counted.input_tokens == created.usage.input_tokens + created.usage.cache_read_input_tokens


def test_stream_frames_are_exact(server):
    body = {"model": "coder", "max_tokens": 5, "stream": True, "messages": HELLO}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with connect_sse(http, "POST", "/v1/messages?beta=true", json=body, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}) as source:
            assert source.response.headers["content-type"].startswith("text/event-stream")
            events = [(sse.event, sse.json()) for sse in source.iter_sse()]
    names = [name for name, _ in events if name != "ping"]
    assert all(name == data["type"] for name, data in events)  # every frame has its event: line
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["input_tokens"] > 0
    blocks = [n for n in names[1:-2]]
    if blocks:
        assert blocks[0] == "content_block_start" and blocks[-1] == "content_block_stop"
        assert set(blocks[1:-1]) <= {"content_block_delta"}
    delta = next(data for name, data in events if name == "message_delta")
    assert delta["usage"]["output_tokens"] >= 1 and delta["delta"]["stop_reason"] in ("end_turn", "max_tokens")


def test_what_claude_code_sends(client, server):
    """Inline system turn, a deferred tool, 128000 max_tokens, beta query string, Bearer auth."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
        {"role": "system", "content": [{"type": "text", "text": "Reminder: be brief."}]},
        {"role": "user", "content": "and again"},
    ]
    tools = [
        {"name": "Bash", "description": "run", "input_schema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                                                                 "properties": {"command": {"type": "string"}}, "additionalProperties": False}},
        {"name": "Never", "description": "never call this", "input_schema": {"type": "object"}, "defer_loading": True},
        {"type": "web_search_20250305", "name": "web_search"},
    ]
    body = {"model": "claude-sonnet-9", "max_tokens": 128000, "messages": messages, "tools": tools, "stream": False,
            "thinking": {"type": "adaptive", "display": "omitted"}, "metadata": {"user_id": "{\"session\": 1}"},
            "output_config": {"effort": "high"}, "context_management": {"edits": []}}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        response = http.post("/v1/messages?beta=true", json=body, headers={"authorization": "Bearer t", "anthropic-beta": "claude-code-20250219,x"})
        assert response.status_code == 200, response.text
        counted = http.post("/v1/messages/count_tokens?beta=true", json={k: v for k, v in body.items() if k != "max_tokens"}).json()
    usage = response.json()["usage"]
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == counted["input_tokens"]
    # The deferred tool and the server tool never reach the prompt.
    without = client.messages.count_tokens(model="coder", messages=messages, tools=[tools[0]])
    assert without.input_tokens == counted["input_tokens"]


def test_stop_sequence(client):
    probe = client.messages.create(model="coder", max_tokens=12, messages=HELLO).content
    text = probe[0].text if probe else ""
    if len(text.strip()) < 6:
        pytest.skip("the random model ended its turn too early to pick a stop sequence")
    stop = text[3:6]
    message = client.messages.create(model="coder", max_tokens=12, messages=HELLO, stop_sequences=[stop])
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == stop
    assert message.content[0].text == text[: text.index(stop)]


def test_prompt_too_long_has_the_text_claude_code_compacts_on(client):
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="short", max_tokens=10, messages=[{"role": "user", "content": "word " * 200}])
    body = info.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: ") and body["error"]["message"].endswith(" tokens > 96 maximum")


@pytest.mark.parametrize(
    ("payload", "status", "kind"),
    [
        (b"{oops", 400, "invalid_request_error"),
        (b'{"model": "coder", "messages": []}', 400, "invalid_request_error"),  # max_tokens missing
        (b'{"model": "coder", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}', 400, "invalid_request_error"),
        (b'{"model": "gpt-9", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}', 404, "not_found_error"),
        (b'{"model": "coder", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}', 400, "invalid_request_error"),
    ],
)
def test_bad_input_gets_anthropic_errors(server, client, payload, status, kind):
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        response = http.post("/v1/messages", content=payload, headers={"content-type": "application/json"})
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == kind and body["error"]["message"]
    assert client.messages.create(model="coder", max_tokens=1, messages=HELLO).usage.output_tokens == 1


def test_root_answers_head_and_get(server):
    with httpx.Client(base_url=server.base_url) as http:
        assert http.head("/").status_code == 200
        assert http.get("/").status_code == 200


def test_models_list_parses_in_the_anthropic_sdk(client):
    page = client.models.list()
    assert {m.id for m in page.data} == {"coder", "short"}
