"""OpenAI Responses through the official SDK (strict) and raw SSE frames."""

from __future__ import annotations

import httpx
import openai
import pytest
from httpx_sse import connect_sse

EOS_BLOCK = {"2": -100}


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    path = str(tiny_models.path("qwen3"))
    return servers.start({
        "coder": {"path": path, "aliases": ["gpt-*"], "sampling": {"temperature": 0.0}},
        "short": {"path": path, "max_context": 96},
    })


@pytest.fixture
def client(server) -> openai.OpenAI:
    return server.openai()


def sse_events(server, body: dict) -> list[tuple[str, dict]]:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with connect_sse(http, "POST", "/v1/responses", json=body) as source:
            assert source.response.headers["content-type"].startswith("text/event-stream")
            return [(sse.event, sse.json()) for sse in source.iter_sse()]


def test_create_with_a_string_input(client):
    response = client.responses.create(model="gpt-5-codex", input="hello there", max_output_tokens=6)
    assert response.id.startswith("resp_") and response.object == "response" and response.model == "gpt-5-codex"
    assert response.status in ("completed", "incomplete")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens <= 6
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert response.usage.output_tokens_details.reasoning_tokens == 0
    if response.status == "incomplete":
        assert response.incomplete_details.reason == "max_output_tokens"


def test_stream_matches_create(client):
    whole = client.responses.create(model="coder", input="hello there", max_output_tokens=8)
    with client.responses.stream(model="coder", input="hello there", max_output_tokens=8) as stream:
        events = list(stream)
    # A random model rarely ends its turn within 8 tokens, so the terminal event is usually
    # response.incomplete, which get_final_response() refuses; the demo-model tests cover that path.
    final = events[-1].response
    assert events[-1].type == f"response.{whole.status}"
    assert final.output_text == whole.output_text
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_stream_frames_are_numbered_and_terminated(server):
    events = sse_events(server, {"model": "coder", "input": "hello there", "max_output_tokens": 6, "stream": True})
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] in ("response.completed", "response.incomplete")
    assert len({data["response"]["id"] for name, data in events if "response" in data}) == 1
    if "response.output_item.added" in names:
        assert names.index("response.output_item.added") < names.index("response.output_text.delta")
        assert names.index("response.output_item.done") > names.index("response.output_text.done")


def test_previous_response_id_continues_the_conversation(client):
    first = client.responses.create(model="coder", input="remember the word cache", max_output_tokens=4)
    follow = client.responses.create(model="coder", input="what was it?", previous_response_id=first.id, max_output_tokens=4)
    alone = client.responses.create(model="coder", input="what was it?", max_output_tokens=4)
    assert follow.usage.input_tokens > alone.usage.input_tokens  # the history was prepended
    assert follow.previous_response_id == first.id


def test_unknown_previous_response_id_is_400(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="coder", input="x", previous_response_id="resp_missing")
    assert info.value.body["param"] == "previous_response_id"


def test_store_false_is_not_kept(client):
    response = client.responses.create(model="coder", input="x", store=False, max_output_tokens=2)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="coder", input="y", previous_response_id=response.id, max_output_tokens=2)


def test_what_codex_sends(client, server):
    """Developer messages with ids, namespace and web_search tools, a function_call round trip."""
    body = {
        "model": "gpt-5.3-codex",
        "input": [
            {"type": "message", "role": "developer", "id": "msg_a", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "status": "completed"},
            {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "a.py\nb.py"},
        ],
        "tools": [
            {"type": "function", "name": "shell", "description": "run", "strict": False,
             "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}}},
            {"type": "namespace", "name": "mcp", "description": "tools", "tools": [
                {"type": "function", "name": "mcp__read", "parameters": {"type": "object", "properties": {}}}]},
            {"type": "web_search", "external_web_access": False},
        ],
        "tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False, "stream": True, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "abc",
        "client_metadata": {"x": "y"}, "max_output_tokens": 4,
    }
    events = sse_events(server, body)
    assert events[-1][0] in ("response.completed", "response.incomplete")
    tools = events[-1][1]["response"]["tools"]
    assert [t["name"] for t in tools] == ["shell", "mcp__read"]


def test_prompt_over_context(server, client):
    long_input = "word " * 200
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="short", input=long_input)
    assert info.value.body["code"] == "context_length_exceeded"
    events = sse_events(server, {"model": "short", "input": long_input, "stream": True})
    assert [name for name, _ in events] == ["response.created", "response.failed"]
    assert events[-1][1]["response"]["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize(
    ("payload", "status", "param"),
    [
        (b"{", 400, None),
        (b'{"model": "coder", "input": 5}', 400, "input"),
        (b'{"model": "coder", "input": [{"type": "message", "role": "alien", "content": "x"}]}', 400, "input[0].role"),
        (b'{"model": "nope", "input": "x"}', 404, "model"),
    ],
)
def test_bad_input_gets_openai_errors(server, client, payload, status, param):
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        response = http.post("/v1/responses", content=payload, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["error"]["param"] == param
    assert client.responses.create(model="coder", input="x", max_output_tokens=1).usage.output_tokens == 1
