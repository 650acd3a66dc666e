"""Reasoning and tool calls through every API, on scripted models whose output is known.

The scripted checkpoints (tests/support/scripted.py) are real MLX models served by a real
worker; only their weights are constructed so that greedy decoding emits a fixed text.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from httpx_sse import connect_sse

from tests.support.scripted import CALL_CUT_AFTER, SPLIT_CALL, THINK_THEN_ANSWER, THINK_THEN_CALL, build_scripted_model

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER_TOOL["function"]["parameters"]}
RESPONSES_TOOL = {"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL["function"]["parameters"]}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
REASONING_CALL = THINK_THEN_CALL[1]
REASONING_ANSWER = THINK_THEN_ANSWER[1]
ANSWER = THINK_THEN_ANSWER[3]
ARGUMENTS = {"city": "Paris", "unit": "celsius"}


@pytest.fixture(scope="module")
def server(servers, tmp_path_factory):
    root = tmp_path_factory.mktemp("scripted")
    caller = build_scripted_model(root / "caller", THINK_THEN_CALL)
    answerer = build_scripted_model(root / "answerer", THINK_THEN_ANSWER)
    split = build_scripted_model(root / "split", SPLIT_CALL)
    return servers.start({
        "caller": {"path": str(caller), "aliases": ["claude-caller"], "sampling": {"temperature": 0.0}},
        "answerer": {"path": str(answerer), "sampling": {"temperature": 0.0}},
        "split": {"path": str(split), "sampling": {"temperature": 0.0}},
    })


# ---------------------------------------------------------------- chat completions

def test_chat_tool_call_non_stream(oai):
    reply = oai.chat.completions.create(model="caller", messages=ASK, tools=[WEATHER_TOOL])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == ARGUMENTS
    assert choice.message.model_extra["reasoning_content"] == REASONING_CALL
    assert reply.usage.completion_tokens_details.reasoning_tokens > 0


def test_chat_tool_call_stream_deltas(server, oai):
    with oai.chat.completions.stream(model="caller", messages=ASK, tools=[WEATHER_TOOL]) as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "tool_calls" and json.loads(call.function.arguments) == ARGUMENTS

    body = {"model": "caller", "messages": ASK, "tools": [WEATHER_TOOL], "stream": True}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with connect_sse(http, "POST", "/v1/chat/completions", json=body) as source:
            chunks = [sse.json() for sse in source.iter_sse() if sse.data != "[DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    first, rest = calls[0], calls[1:]
    assert first["index"] == 0 and first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert all(set(c) == {"index", "function"} and set(c["function"]) == {"arguments"} for c in rest)
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == ARGUMENTS
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    assert reasoning == REASONING_CALL
    # Reasoning comes before the call; nothing of the markup leaks into content.
    assert max(i for i, d in enumerate(deltas) if d.get("reasoning_content")) < min(i for i, d in enumerate(deltas) if "tool_calls" in d)
    assert "".join(d.get("content") or "" for d in deltas).strip() == ""
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_call_cut_by_max_tokens_comes_back_as_text(oai):
    """A call cut off mid-arguments is not a call: no tool_calls entry with half (or no)
    arguments for a client to choke on, its text in content, finish_reason "length"."""
    whole = oai.chat.completions.create(model="split", messages=ASK, tools=[WEATHER_TOOL], max_tokens=CALL_CUT_AFTER)
    choice = whole.choices[0]
    assert choice.finish_reason == "length" and not choice.message.tool_calls
    assert choice.message.content == "".join(SPLIT_CALL[:CALL_CUT_AFTER])
    complete = oai.chat.completions.create(model="split", messages=ASK, tools=[WEATHER_TOOL])
    (call,) = complete.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_call_cut_by_max_tokens_streams_as_the_calls_fragments_only(oai):
    """Streamed, the cut call already went out as fragments (as OpenAI's and vLLM's streams send
    them up to finish_reason "length"): its raw text does not follow again as content."""
    chunks = list(oai.chat.completions.create(model="split", messages=ASK, tools=[WEATHER_TOOL], max_tokens=CALL_CUT_AFTER,
                                              stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not "".join(d.content or "" for d in deltas)
    calls = [call for d in deltas for call in d.tool_calls or ()]
    assert {call.index for call in calls} == {0} and calls[0].function.name == "get_weather"
    arguments = "".join(call.function.arguments or "" for call in calls)
    assert '{"city":"Paris"}'.startswith(arguments), arguments
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]


def test_tool_choice_none_leaves_the_text_unparsed(oai):
    reply = oai.chat.completions.create(model="caller", messages=ASK, tools=[WEATHER_TOOL], tool_choice="none")
    assert reply.choices[0].finish_reason == "stop" and not reply.choices[0].message.tool_calls
    assert "<tool_call>" in reply.choices[0].message.content


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_required_and_named_tool_choice(oai, choice):
    reply = oai.chat.completions.create(model="caller", messages=ASK, tools=[WEATHER_TOOL], tool_choice=choice)
    assert reply.choices[0].finish_reason == "tool_calls"


def test_named_tool_choice_must_name_an_offered_tool(oai):
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(model="caller", messages=ASK, tools=[WEATHER_TOOL],
                                    tool_choice={"type": "function", "function": {"name": "launch"}})
    assert info.value.body["param"] == "tool_choice"


def test_tool_round_trip_history_renders(oai):
    history = ASK + [
        {"role": "assistant", "content": None, "reasoning_content": REASONING_CALL,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGUMENTS)}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny"},
    ]
    reply = oai.chat.completions.create(model="answerer", messages=history, tools=[WEATHER_TOOL])
    assert reply.choices[0].message.content == ANSWER and reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.model_extra["reasoning_content"] == REASONING_ANSWER


# ---------------------------------------------------------------- Anthropic Messages

def test_messages_thinking_and_tool_use(claude):
    message = claude.messages.create(model="claude-caller", max_tokens=200, messages=ASK, tools=[ANTHROPIC_TOOL])
    thinking, tool_use = message.content
    assert thinking.type == "thinking" and thinking.thinking == REASONING_CALL and thinking.signature
    assert tool_use.type == "tool_use" and tool_use.id.startswith("toolu_") and tool_use.name == "get_weather"
    assert tool_use.input == ARGUMENTS and message.stop_reason == "tool_use"


def test_messages_stream_blocks_and_signature(server, claude):
    with claude.messages.stream(model="caller", max_tokens=200, messages=ASK, tools=[ANTHROPIC_TOOL]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "tool_use"] and final.content[1].input == ARGUMENTS
    body = {"model": "caller", "max_tokens": 200, "stream": True, "messages": ASK, "tools": [ANTHROPIC_TOOL]}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with connect_sse(http, "POST", "/v1/messages", json=body) as source:
            events = [(sse.event, sse.json()) for sse in source.iter_sse() if sse.event != "ping"]
    block_events = [(n, d) for n, d in events if n.startswith("content_block")]
    indexes = [d["index"] for _, d in block_events]
    assert indexes == sorted(indexes) and set(indexes) == {0, 1}
    thinking = [d for _, d in block_events if d["index"] == 0]
    assert thinking[0]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert thinking[-2]["delta"]["type"] == "signature_delta" and thinking[-2]["delta"]["signature"]
    tool = [d for _, d in block_events if d["index"] == 1]
    assert tool[0]["content_block"]["type"] == "tool_use" and tool[0]["content_block"]["input"] == {}
    assert json.loads("".join(d["delta"]["partial_json"] for d in tool[1:-1])) == ARGUMENTS
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_messages_tool_result_round_trip(claude):
    history = ASK + [
        {"role": "assistant", "content": [{"type": "thinking", "thinking": REASONING_CALL, "signature": "anything"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": ARGUMENTS}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 degrees", "is_error": False,
                                      "cache_control": {"type": "ephemeral"}}]},
    ]
    message = claude.messages.create(model="answerer", max_tokens=200, messages=history, tools=[ANTHROPIC_TOOL],
                                     thinking={"type": "enabled", "budget_tokens": 1024})
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].text == ANSWER and message.stop_reason == "end_turn"


def test_messages_call_cut_by_max_tokens_is_text_not_tool_use(claude):
    message = claude.messages.create(model="split", max_tokens=CALL_CUT_AFTER, messages=ASK, tools=[ANTHROPIC_TOOL])
    assert message.stop_reason == "max_tokens"
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "".join(SPLIT_CALL[:CALL_CUT_AFTER])


def test_messages_stream_of_a_cut_call_sends_no_text_block(claude):
    with claude.messages.stream(model="split", max_tokens=CALL_CUT_AFTER, messages=ASK, tools=[ANTHROPIC_TOOL]) as stream:
        events = list(stream)
    kinds = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert kinds == ["tool_use"] and events[-1].type == "message_stop"
    assert [e.delta.stop_reason for e in events if e.type == "message_delta"] == ["max_tokens"]


def test_disable_parallel_tool_use_keeps_one_call(claude):
    message = claude.messages.create(model="caller", max_tokens=200, messages=ASK, tools=[ANTHROPIC_TOOL],
                                     tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert [b.type for b in message.content].count("tool_use") == 1


# ---------------------------------------------------------------- Responses

def test_responses_reasoning_and_function_call(oai):
    response = oai.responses.create(model="caller", input="What is the weather in Paris?", tools=[RESPONSES_TOOL])
    reasoning, call = response.output
    assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_") and reasoning.content[0].text == REASONING_CALL
    assert call.type == "function_call" and call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert call.name == "get_weather" and json.loads(call.arguments) == ARGUMENTS and call.status == "completed"
    assert response.status == "completed" and response.usage.output_tokens_details.reasoning_tokens > 0


def test_responses_stream_final_response(oai):
    with oai.responses.stream(model="answerer", input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == ANSWER and final.status == "completed"
    with oai.responses.stream(model="caller", input="weather?", tools=[RESPONSES_TOOL]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds.index("response.function_call_arguments.delta") > kinds.index("response.output_item.added")
    assert [item.type for item in final.output] == ["reasoning", "function_call"]


def test_responses_function_call_output_round_trip(oai):
    first = oai.responses.create(model="caller", input="weather?", tools=[RESPONSES_TOOL])
    call = first.output[1]
    follow = oai.responses.create(
        model="answerer", previous_response_id=first.id, tools=[RESPONSES_TOOL],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18 degrees"}],
    )
    assert follow.output_text == ANSWER
    replayed = oai.responses.create(model="answerer", store=False, tools=[RESPONSES_TOOL], input=[
        {"type": "message", "role": "user", "content": "weather?"},
        {"type": "function_call", "id": call.id, "call_id": call.call_id, "name": call.name, "arguments": call.arguments, "status": "completed"},
        {"type": "function_call_output", "id": "fco_1", "call_id": call.call_id, "output": "18 degrees"},
    ])
    assert replayed.output_text == ANSWER
    assert follow.usage.input_tokens == replayed.usage.input_tokens + _reasoning_tokens_in_history(oai)


def _reasoning_tokens_in_history(oai) -> int:
    """previous_response_id replays the stored reasoning too; the manual replay above had none."""
    with_reasoning = oai.chat.completions.create(model="answerer", max_tokens=1, messages=[
        {"role": "user", "content": "x"}, {"role": "assistant", "content": "", "reasoning_content": REASONING_CALL}, {"role": "user", "content": "y"}])
    without = oai.chat.completions.create(model="answerer", max_tokens=1, messages=[
        {"role": "user", "content": "x"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "y"}])
    return with_reasoning.usage.prompt_tokens - without.usage.prompt_tokens
