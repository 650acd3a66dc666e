"""tool_choice required / named by constrained decoding: at temperature 1, random-weight models
write calls in their family's format whose arguments validate, through both SDKs, whole and streamed."""

from __future__ import annotations

import json

import jsonschema
import pytest

from router.cli import demo_model_path
from tests.support.server import LiveServer

pytestmark = pytest.mark.slow

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                            "unit": {"enum": ["C", "F"]}},
           "required": ["city", "unit"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 24},
                                           "limit": {"type": "integer", "minimum": 1, "maximum": 20}},
          "required": ["query"], "additionalProperties": False}
SCHEMAS = {"get_weather": WEATHER, "search": SEARCH}
TOOLS = [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in SCHEMAS.items()]
ANTHROPIC_TOOLS = [{"name": name, "input_schema": schema} for name, schema in SCHEMAS.items()]
ASK = [{"role": "user", "content": "Weather in Oslo, then search for ferries."}]
FAMILIES = ["hermes", "qwen3_coder", "llama3_json"]


@pytest.fixture(scope="module")
def server(servers, tiny_models) -> LiveServer:
    models = {family: {"path": str(tiny_models.path("qwen3")), "tool_parser": family, "reasoning_parser": "none",
                       "sampling": {"temperature": 1.0}} for family in FAMILIES}
    models["demo"] = {"path": str(demo_model_path()), "sampling": {"temperature": 1.0}}
    return servers.start(models)


def _check(calls, only: str | None = None):
    assert calls, "no call"
    for name, arguments in calls:
        assert name in SCHEMAS and (only is None or name == only), name
        jsonschema.validate(arguments, SCHEMAS[name])


@pytest.mark.parametrize("model", [*FAMILIES, "demo"])
def test_required_calls_validate_whole(oai, model):
    for seed in range(3):
        reply = oai.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice="required", seed=seed,
                                            max_tokens=1200)
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", (choice.finish_reason, choice.message.content)
        _check([(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls])


@pytest.mark.parametrize("model", FAMILIES)
def test_named_calls_validate_streamed(oai, model):
    for seed in range(2):
        chunks = list(oai.chat.completions.create(model=model, messages=ASK, tools=TOOLS, seed=seed, max_tokens=1200, stream=True,
                                                  tool_choice={"type": "function", "function": {"name": "search"}}))
        calls: dict[int, list[str]] = {}
        for chunk in chunks:
            for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(call.index, ["", ""])
                entry[0] += call.function.name or ""
                entry[1] += call.function.arguments or ""
        _check([(name, json.loads(arguments)) for name, arguments in calls.values()], only="search")
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_one_call_when_parallel_calls_are_off(oai):
    for seed in range(3):
        reply = oai.chat.completions.create(model="hermes", messages=ASK, tools=TOOLS, tool_choice="required", seed=seed,
                                            parallel_tool_calls=False, max_tokens=1200)
        assert len(reply.choices[0].message.tool_calls) == 1


# One call each: Anthropic requests carry no seed, and a random model may chain calls past max_tokens.
@pytest.mark.parametrize(("choice", "only"), [({"type": "any", "disable_parallel_tool_use": True}, None),
                                              ({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}, "get_weather")])
def test_anthropic_tool_choice_any_and_tool(claude, choice, only):
    for _ in range(2):
        message = claude.messages.create(model="qwen3_coder", max_tokens=1200, messages=ASK, tools=ANTHROPIC_TOOLS, tool_choice=choice)
        assert message.stop_reason == "tool_use"
        _check([(b.name, b.input) for b in message.content if b.type == "tool_use"], only=only)
    with claude.messages.stream(model="hermes", max_tokens=1200, messages=ASK, tools=ANTHROPIC_TOOLS, tool_choice=choice) as stream:
        final = stream.get_final_message()
    _check([(b.name, b.input) for b in final.content if b.type == "tool_use"], only=only)


@pytest.mark.parametrize("model", ["hermes", "qwen3_coder"])
def test_strict_tools_with_auto_constrain_the_calls_the_model_opens(oai, model):
    strict = [{"type": "function", "function": {**tool["function"], "strict": True}} for tool in TOOLS]
    calls = 0
    for seed in range(6):
        reply = oai.chat.completions.create(model=model, messages=ASK, tools=strict, seed=seed, max_tokens=1200)
        choice = reply.choices[0]
        if choice.message.tool_calls:  # the random model's own choice to open a call
            calls += 1
            # Free text may follow the calls (a random model's, until max_tokens).
            assert choice.finish_reason in ("tool_calls", "length")
            _check([(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls])
        else:
            assert "<tool_call>" not in (choice.message.content or "") or choice.finish_reason == "length"
    # Unconstrained, this random model never completes a call that parses; constrained, every call
    # it opens does (3 of 6 seeds here).
    assert calls >= 1


def test_responses_strict_function_tools(oai):
    tools = [{"type": "function", "name": name, "parameters": schema, "strict": True} for name, schema in SCHEMAS.items()]
    reply = oai.responses.create(model="hermes", input="Weather in Oslo.", tools=tools, tool_choice="required", max_output_tokens=1200,
                                 parallel_tool_calls=False)  # no seed here: one bounded call
    calls = [item for item in reply.output if item.type == "function_call"]
    _check([(call.name, json.loads(call.arguments)) for call in calls])
