"""Inbound translations (chat, Anthropic Messages, Responses): a value of the wrong JSON type
at any depth is a 400 naming its path, unknown things are still skipped, and whatever gets
through reaches the chat template well typed."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.api.anthropic import input as anthropic_input
from router.api.anthropic.schemas import MessagesBody
from router.api.decode import decode_body
from router.api.openai import chat
from router.api.openai.schemas import ChatCompletionBody
from router.api.responses import input as responses_input
from router.api.responses.controller import ResponseShell
from router.api.responses.schemas import ResponsesBody
from router.errors import InvalidRequestError
from router.turn.messages import normalize_messages
from router.turn.turn import TurnRequest, _validated_tools


def _decode(body: dict[str, Any], body_type: type) -> Any:
    return decode_body(json.dumps(body).encode(), body_type)


def translate_chat(body: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    request = chat.to_turn_request(_decode(body, ChatCompletionBody))
    return _template_inputs(request)


def translate_anthropic(body: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    parsed = _decode(body, MessagesBody)
    request = anthropic_input.to_turn_request(parsed)
    normalize_messages(anthropic_input.to_chat_messages(parsed))  # what count_tokens renders
    return _template_inputs(request)


def translate_responses(body: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    parsed = _decode(body, ResponsesBody)
    request = responses_input.to_turn_request(parsed, [])
    msgspec.json.encode(ResponseShell(parsed).render("completed", []))  # the echo of tools and tool_choice
    return _template_inputs(request)


def _template_inputs(request: TurnRequest) -> tuple[list[dict[str, Any]], Any]:
    """What prepare_turn hands the chat template."""
    return normalize_messages(request.messages), _validated_tools(request)


TRANSLATE = {"chat": translate_chat, "anthropic": translate_anthropic, "responses": translate_responses}
USER = [{"role": "user", "content": "hi"}]
FN = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def _error(api: str, body: dict[str, Any]) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        TRANSLATE[api](body)
    assert info.value.status == 400 and info.value.type == "invalid_request_error"
    return info.value


@pytest.mark.parametrize(
    ("api", "body", "param"),
    [
        # Each of these was a 500.
        ("chat", {"model": "m", "messages": [{"role": "assistant", "content": "x", "tool_calls": 5}]}, "messages[0].tool_calls"),
        ("chat", {"model": "m", "messages": USER, "tools": [FN], "tool_choice": {"type": "function", "function": "f"}}, "tool_choice.function"),
        ("chat", {"model": "m", "messages": [{"role": ["user"], "content": "x"}]}, "messages[0].role"),
        ("chat", {"model": "m", "messages": [{"role": "user", "content": [{"type": ["text"], "text": "x"}]}]}, "messages[0].content[0].type"),
        ("anthropic", {"model": "m", "messages": USER, "system": [{"type": "text", "text": 5}]}, "system.0.text"),
        ("anthropic", {"model": "m", "messages": [*USER, {"role": "assistant", "content": [{"type": "text", "text": 5}]}]}, "messages.1.content.0.text"),
        ("anthropic", {"model": "m", "messages": [*USER, {"role": "assistant", "content": [{"type": "thinking", "thinking": []}]}]}, "messages.1.content.0.thinking"),
        ("anthropic", {"model": "m", "messages": USER, "tools": [{"type": ["custom"], "name": "f"}]}, "tools.0.type"),
        ("responses", {"model": "m", "input": [{"type": "reasoning", "content": 5}, *USER]}, "input[0].content"),
        ("responses", {"model": "m", "input": "hi", "tools": [{"type": "namespace", "tools": 5}]}, "tools[0].tools"),
        # Wrong inner types that used to slip through to the template or json.dumps.
        ("chat", {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages[0].content[0].text"),
        ("chat", {"model": "m", "messages": [{"role": "user", "content": [5]}]}, "messages[0].content[0]"),
        ("chat", {"model": "m", "messages": [{"role": "tool", "content": "x", "tool_call_id": 7}]}, "messages[0].tool_call_id"),
        ("chat", {"model": "m", "messages": [{"role": "user", "content": "x", "name": {}}]}, "messages[0].name"),
        ("chat", {"model": "m", "messages": [{"role": "assistant", "content": "x", "reasoning_content": 1}]}, "messages[0].reasoning_content"),
        ("chat", {"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]}, "messages[0].tool_calls[0].id"),
        ("chat", {"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}]},
         "messages[0].tool_calls[0].function.arguments"),
        ("chat", {"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": 5}}]}]}, "messages[0].tool_calls[0].function.name"),
        ("chat", {"model": "m", "messages": [{"role": "assistant", "tool_calls": ["f"]}]}, "messages[0].tool_calls[0]"),
        ("chat", {"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}, "tools[0].function.parameters"),
        ("chat", {"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": "f", "description": 5}}]}, "tools[0].function.description"),
        ("chat", {"model": "m", "messages": USER, "tools": [{"type": 5, "function": {"name": "f"}}]}, "tools[0].type"),
        ("chat", {"model": "m", "messages": USER, "tools": [FN], "tool_choice": {"type": "function", "function": {"name": 5}}}, "tool_choice.function.name"),
        ("chat", {"model": "m", "messages": USER, "tools": [FN], "tool_choice": {"type": "allowed_tools", "mode": 5}}, "tool_choice.mode"),
        ("anthropic", {"model": "m", "messages": [{"role": "user", "content": [5]}]}, "messages.0.content.0"),
        ("anthropic", {"model": "m", "messages": [{"role": 5, "content": "x"}]}, "messages.0.role"),
        ("anthropic", {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
        ("anthropic", {"model": "m", "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}]},
         "messages.0.content.0.input"),
        ("anthropic", {"model": "m", "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": 5, "name": "f", "input": {}}]}]},
         "messages.0.content.0.id"),
        ("anthropic", {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": [], "content": "x"}]}]},
         "messages.0.content.0.tool_use_id"),
        ("anthropic", {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": {}}]}]}]},
         "messages.0.content.0.content.0.text"),
        ("anthropic", {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}]},
         "messages.0.content.0.is_error"),
        ("anthropic", {"model": "m", "messages": [{"role": "system", "content": [{"type": "text", "text": 1}]}, *USER]}, "messages.0.content.0.text"),
        ("anthropic", {"model": "m", "messages": USER, "tools": [{"name": "f", "input_schema": "x"}]}, "tools.0.input_schema"),
        ("anthropic", {"model": "m", "messages": USER, "tools": [{"name": 5}]}, "tools.0.name"),
        ("anthropic", {"model": "m", "messages": USER, "tools": [{"name": "f", "defer_loading": "no"}]}, "tools.0.defer_loading"),
        ("anthropic", {"model": "m", "messages": USER, "tools": [{"name": "f"}], "tool_choice": {"type": "tool", "name": 5}}, "tool_choice.name"),
        ("anthropic", {"model": "m", "messages": USER, "tool_choice": {"type": "auto", "disable_parallel_tool_use": "x"}}, "tool_choice.disable_parallel_tool_use"),
        ("anthropic", {"model": "m", "messages": USER, "thinking": {"type": 5}}, "thinking.type"),
        ("anthropic", {"model": "m", "messages": USER, "thinking": {"type": "enabled", "budget_tokens": "lots"}}, "thinking.budget_tokens"),
        ("responses", {"model": "m", "input": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": 5}]}, *USER]}, "input[0].summary[0].text"),
        ("responses", {"model": "m", "input": [{"type": "reasoning", "summary": ["x"]}, *USER]}, "input[0].summary[0]"),
        ("responses", {"model": "m", "input": [{"type": 5, "role": "user", "content": "x"}]}, "input[0].type"),
        ("responses", {"model": "m", "input": [{"role": 5, "content": "x"}]}, "input[0].role"),
        ("responses", {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": []}]}]}, "input[0].content[0].text"),
        ("responses", {"model": "m", "input": [{"role": "user", "content": 5}]}, "input[0].content"),
        ("responses", {"model": "m", "input": [*USER, {"type": "function_call", "name": "f", "call_id": 5, "arguments": "{}"}]}, "input[1].call_id"),
        ("responses", {"model": "m", "input": [*USER, {"type": "function_call", "name": "f", "arguments": 5}]}, "input[1].arguments"),
        ("responses", {"model": "m", "input": [*USER, {"type": "function_call", "name": 5}]}, "input[1].name"),
        ("responses", {"model": "m", "input": [*USER, {"type": "function_call_output", "call_id": "c", "output": 5}]}, "input[1].output"),
        ("responses", {"model": "m", "input": "hi", "tools": [{"type": "function", "name": 5}]}, "tools[0].name"),
        ("responses", {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": "x"}]}, "tools[0].parameters"),
        ("responses", {"model": "m", "input": "hi", "tools": [{"type": "namespace", "tools": [{"type": "function", "name": "f", "parameters": 1}]}]},
         "tools[0].tools[0].parameters"),
        ("responses", {"model": "m", "input": "hi", "tools": [{"type": "namespace", "tools": [5]}]}, "tools[0].tools[0]"),
        ("responses", {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": 5}}, "tool_choice.name"),
        ("responses", {"model": "m", "input": "hi", "reasoning": {"effort": 5}}, "reasoning.effort"),
    ],
)
def test_wrong_inner_types_are_400s_naming_the_path(api, body, param):
    error = _error(api, body)
    assert error.param == param, error.message
    assert param in error.message


@pytest.mark.parametrize(
    ("api", "body"),
    [
        # Unknown fields, part/block/item/tool types: skipped, as agents need.
        ("chat", {"model": "m", "messages": [{"role": "user", "content": "x", "x_extra": {"a": [1]}}], "tools": [FN, {"type": "custom", "custom": {}}]}),
        ("chat", {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
            {"function": {"name": "f", "arguments": "not json"}}, {"function": {"name": "f", "arguments": "[" * 5000}}]}]}),
        ("chat", {"model": "m", "messages": USER, "tools": [FN], "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}}),
        ("anthropic", {"model": "m", "system": [{"type": "text", "text": "s"}, {"type": "made_up", "text": 5}], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "search_result", "content": 5}]},
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": 5}, {"type": "server_tool_use", "input": 5}]}],
         "tools": [{"type": "web_search_20250305", "name": 5}, {"name": "f", "x_extra": 1}]}),
        ("responses", {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}, {"type": "made_up", "text": 5}]},
                                                {"type": "web_search_call", "action": 5}, {"type": "item_reference", "id": 5}],
         "tools": [{"type": "web_search", "name": 5}, {"type": "namespace", "tools": [{"type": "mcp", "name": 5}]}], "tool_choice": {"type": "web_search"}}),
    ],
)
def test_unknown_things_are_still_skipped(api, body):
    messages, _tools = TRANSLATE[api](body)
    assert messages


def test_arguments_that_are_not_a_json_object_stay_a_string():
    messages, _ = translate_chat({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
        {"function": {"name": "f", "arguments": "[1, 2]"}}, {"function": {"name": "f", "arguments": "{\"a\": 1}"}}]}]})
    assert [c["function"]["arguments"] for c in messages[0]["tool_calls"]] == ["[1, 2]", {"a": 1}]


# ---------------------------------------------------------------- property: any wrong type anywhere

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}
TEMPLATES: list[tuple[str, dict[str, Any]]] = [
    ("chat", {"model": "m", "tools": [FN], "tool_choice": {"type": "function", "function": {"name": "f"}}, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "q"}], "name": "bob"},
        {"role": "assistant", "content": None, "tool_calls": [CALL], "reasoning_content": "r"},
        {"role": "tool", "tool_call_id": "call_1", "content": "a"}]}),
    ("anthropic", {"model": "m", "system": [{"type": "text", "text": "s"}], "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
                   "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True}, "thinking": {"type": "enabled", "budget_tokens": 9},
                   "messages": [
        {"role": "system", "content": "inline"}, {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "x"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a"}], "is_error": False}]}]}),
    ("responses", {"model": "m", "instructions": "i", "reasoning": {"effort": "low"}, "tool_choice": {"type": "function", "name": "f"},
                   "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": False},
                             {"type": "namespace", "tools": [{"type": "function", "name": "g"}]}],
                   "input": [
        {"type": "message", "role": "developer", "content": "s"}, {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "a"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]}),
]
OTHER_VALUES = [0, -1, 2**70, 1.5, "", "x", [], [1], ["x"], [{}], {}, {"a": 1}, {"type": "text"}, None, True, False]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [p for key, child in items for p in [prefix + (key,), *_paths(child, prefix + (key,))]]


def _kind(value: Any) -> str:
    return type(value).__name__ if not isinstance(value, bool) else "bool"


def _as_tuple(param: str) -> tuple[str, ...]:
    """``messages[0].content`` and ``messages.0.content`` alike → ("messages", "0", "content")."""
    return tuple(part for part in re.split(r"[.\[\]]+", param) if part)


def assert_template_ready(messages: list[dict[str, Any]], tools: Any) -> None:
    """Every field a chat template reads has the type it expects."""
    for message in messages:
        assert isinstance(message["role"], str) and isinstance(message["content"], str)
        for key in ("name", "tool_call_id", "reasoning_content"):
            assert message.get(key) is None or isinstance(message[key], str)
        for call in message.get("tool_calls") or []:
            assert call["id"] is None or isinstance(call["id"], str)
            assert isinstance(call["function"]["name"], str) and isinstance(call["function"]["arguments"], (str, dict))
    for tool in tools or []:
        function = tool["function"]
        assert isinstance(function["name"], str) and isinstance(function.get("parameters", {}), dict)


@st.composite
def one_wrong_value(draw: st.DrawFn) -> tuple[str, dict[str, Any], tuple, Any, Any]:
    api, template = draw(st.sampled_from(TEMPLATES))
    path = draw(st.sampled_from(_paths(template)))
    body = copy.deepcopy(template)
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    old, new = parent[path[-1]], draw(st.sampled_from(OTHER_VALUES))
    parent[path[-1]] = new
    return api, body, path, old, new


@settings(max_examples=1500, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_wrong_value())
def test_any_value_of_another_type_is_a_400_at_its_path_or_harmless(case):
    api, body, path, old, new = case
    try:
        messages, tools = TRANSLATE[api](body)
    except InvalidRequestError as error:
        assert error.param, error.message
        if _kind(old) != _kind(new) and new is not None:
            # The error names the changed value, a field inside it, or the object holding it.
            changed, named = tuple(str(k) for k in path), _as_tuple(error.param)
            assert changed[: len(named)] == named or named[: len(changed)] == changed, (error.param, path)
        return
    assert_template_ready(messages, tools)
