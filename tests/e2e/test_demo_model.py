"""The bundled demo model through the live server: text replies and tool round trips on every API.

This is what a newcomer sees after ``rapid-mlx serve``: the shipped artifact (trained by
``engines/demo/build.py``) behind a real server, driven by the openai and anthropic SDKs
in strict mode. Decoding is greedy, so each answer is reproducible. The city is one of
the demo's training cities (``lexicon.TRAIN_CITIES``) in a request the test writes;
``engines/demo/evaluate.py`` measures how often that works, here it must work end to end.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from engines.demo import build
from engines.demo import lexicon as lx
from router.cli import DEMO_MODEL_OPTIONS

pytestmark = pytest.mark.slow

CITY = "Lisbon"
assert CITY in lx.TRAIN_CITIES
ASK = [{"role": "user", "content": f"What is the weather in {CITY}?"}]
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string", "description": "The city name, e.g. Paris."}},
              "required": ["city"]}
DESCRIPTION = "Get the current weather in a city."
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMETERS}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMETERS}
RESPONSES_TOOL = {"type": "function", "name": "get_weather", "description": DESCRIPTION, "parameters": PARAMETERS}
# What a weather tool returns, in the shape the demo model was trained on.
RESULT = json.dumps({"city": CITY, "temperature": 7, "unit": "celsius", "condition": "light rain"})


@pytest.fixture(scope="module")
def server(servers):
    # The options `rapid-mlx serve` gives the demo model: greedy, thinking off unless asked.
    return servers.start({
        "demo": {"path": str(build.ARTIFACT_DIR), "aliases": ["claude-*", "gpt-*"], **DEMO_MODEL_OPTIONS},
        "demo-q4": {"path": str(build.QUANTIZED_DIR), **DEMO_MODEL_OPTIONS},
    })


def _assert_answers_with_result(text: str) -> None:
    # A text answer about the city: this checks the round trip on each API. How often the
    # model reads the temperature and condition out of a result is measured by evaluate.py
    # and asserted in tests/demo/test_demo_model.py; RESULT's "light rain" is not among the
    # conditions it was trained on.
    assert CITY in text and len(text.split()) >= 3 and "<" not in text, text


# ---------------------------------------------------------------- chat completions

@pytest.mark.parametrize("model", ["demo", "demo-q4"])
def test_chat_reply_is_readable_text(oai, model):
    reply = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello!"}])
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert len(choice.message.content.split()) >= 2 and "<" not in choice.message.content, choice.message.content


def test_thinking_on_request_goes_to_reasoning_content(oai):
    reply = oai.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Hello!"}],
                                        extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    message = reply.choices[0].message
    assert message.model_extra["reasoning_content"].strip() and "<think>" not in (message.content or "")
    assert message.content and reply.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_tool_call_then_answer_from_the_result(oai, stream):
    if stream:
        with oai.chat.completions.stream(model="demo", messages=ASK, tools=[CHAT_TOOL]) as events:
            first = events.get_final_completion()
    else:
        first = oai.chat.completions.create(model="demo", messages=ASK, tools=[CHAT_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": CITY}

    history = ASK + [choice.message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
    answer = oai.chat.completions.create(model="demo", messages=history, tools=[CHAT_TOOL])
    assert answer.choices[0].finish_reason == "stop" and not answer.choices[0].message.tool_calls
    _assert_answers_with_result(answer.choices[0].message.content)


def test_readme_example_reads_the_result(oai):
    """The top-level README's openai example, as written there, prints what it says."""
    tools = [{"type": "function", "function": {"name": "get_weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": "What is the weather in Lisbon?"}]
    reply = oai.chat.completions.create(model="demo", messages=messages, tools=tools)
    call = reply.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Lisbon"})
    result = {"city": "Lisbon", "temperature": 21, "unit": "celsius", "condition": "sunny"}
    messages += [reply.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
    answer = oai.chat.completions.create(model="demo", messages=messages, tools=tools)
    # Here: "It is 21 degrees Celsius and sunny in Lisbon right now." (another BLAS may pick
    # other words at a near tie, so the test checks the facts).
    assert {"Lisbon", "sunny", "21"} <= set(answer.choices[0].message.content.replace(".", " ").split())


def test_readme_structured_output_example_fits_its_schema(oai):
    """The README's structured-outputs example, as written there: JSON valid against its schema."""
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "sky": {"enum": ["sunny", "cloudy", "rainy"]}},
              "required": ["city", "sky"], "additionalProperties": False}
    reply = oai.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "What is the weather in Lisbon?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "weather", "schema": schema}})
    # Here: {"city": "Lisbon, answer a few" , "sky" : "sunny" } (greedy; the words are the demo's).
    value = json.loads(reply.choices[0].message.content)
    jsonschema.validate(value, schema)
    assert value["city"].startswith("Lisbon")


def test_quantized_model_calls_the_tool(oai):
    reply = oai.chat.completions.create(model="demo-q4", messages=ASK, tools=[CHAT_TOOL])
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)


def test_agent_sized_prompt_is_accepted(oai):
    """Claude Code sends ~12k tokens of system prompt and tools; the demo model takes them."""
    system = " ".join(lx.AGENT_SENTENCES * 32)
    reply = oai.chat.completions.create(
        model="demo", messages=[{"role": "system", "content": system}, *ASK], tools=[CHAT_TOOL], max_tokens=32)
    assert reply.usage.prompt_tokens > 12_000
    assert reply.choices[0].finish_reason in {"stop", "tool_calls", "length"}


# ---------------------------------------------------------------- Anthropic Messages

def test_messages_stream_tool_round_trip(claude):
    with claude.messages.stream(model="claude-opus-4-6", max_tokens=200, messages=ASK, tools=[ANTHROPIC_TOOL],
                                thinking={"type": "disabled"}) as stream:
        first = stream.get_final_message()
    assert first.model == "claude-opus-4-6" and first.stop_reason == "tool_use", first.content
    (tool_use,) = [b for b in first.content if b.type == "tool_use"]
    assert tool_use.name == "get_weather" and tool_use.input == {"city": CITY}

    history = ASK + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": RESULT}]},
    ]
    with claude.messages.stream(model="claude-opus-4-6", max_tokens=200, messages=history, tools=[ANTHROPIC_TOOL],
                                thinking={"type": "disabled"}) as stream:
        answer = stream.get_final_message()
    assert answer.stop_reason == "end_turn" and [b.type for b in answer.content] == ["text"]
    _assert_answers_with_result(answer.content[0].text)


def test_messages_thinking_block_first(claude):
    message = claude.messages.create(model="claude-opus-4-6", max_tokens=200, messages=ASK, tools=[ANTHROPIC_TOOL],
                                     thinking={"type": "adaptive"})
    assert message.content[0].type == "thinking" and message.content[0].thinking.strip()
    assert message.content[0].signature


# ---------------------------------------------------------------- Responses

def test_responses_stream_tool_round_trip(oai):
    with oai.responses.stream(model="gpt-5-codex", input=ASK[0]["content"], tools=[RESPONSES_TOOL]) as stream:
        first = stream.get_final_response()
    assert first.model == "gpt-5-codex" and first.status == "completed"
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": CITY}

    with oai.responses.stream(model="gpt-5-codex", previous_response_id=first.id, tools=[RESPONSES_TOOL],
                              input=[{"type": "function_call_output", "call_id": call.call_id, "output": RESULT}]) as stream:
        answer = stream.get_final_response()
    assert answer.status == "completed" and not [item for item in answer.output if item.type == "function_call"]
    _assert_answers_with_result(answer.output_text)
