"""Structured outputs by constrained decoding: random-weight and demo models at temperature 1
write JSON that parses and validates against the request's schema, through the real SDK."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest

from router.cli import demo_model_path
from tests.support.server import LiveServer

pytestmark = pytest.mark.slow

SCHEMAS = {
    "nested": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "forecast": {
                "type": "object",
                "properties": {"high": {"type": "integer", "minimum": -40, "maximum": 50},
                               "sky": {"enum": ["sun", "rain", "snow"]}},
                "required": ["high", "sky"],
                "additionalProperties": False,
            },
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "note": {"type": "string", "maxLength": 8},
        },
        "required": ["city", "forecast"],
        "additionalProperties": False,
    },
    "enum_and_bool": {
        "type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}},
        "required": ["answer", "sure"],
        "additionalProperties": False,
    },
    "list_of_objects": {
        "type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99}},
                  "required": ["id"], "additionalProperties": False},
        "minItems": 1,
        "maxItems": 4,
    },
}
ASK = [{"role": "user", "content": "Give me the weather as JSON."}]


@pytest.fixture(scope="module")
def server(servers, tiny_models) -> LiveServer:
    return servers.start({
        "tiny": {"path": str(tiny_models.path("qwen3")), "sampling": {"temperature": 1.0}},
        "llama": {"path": str(tiny_models.path("llama")), "sampling": {"temperature": 1.0}},
        # A model that thinks first (qwen3 reasoning, <think> as an added token): the grammar
        # starts after its think block.
        "demo": {"path": str(demo_model_path()), "sampling": {"temperature": 1.0}},
    })


def _schema_format(name: str) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}


@pytest.mark.parametrize("model", ["tiny", "llama", "demo"])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_json_schema_response_validates(oai: openai.OpenAI, model, name):
    for seed in range(3):
        reply = oai.chat.completions.create(model=model, messages=ASK, response_format=_schema_format(name),
                                            temperature=1.0, seed=seed, max_tokens=1024)
        choice = reply.choices[0]
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content), SCHEMAS[name])


def test_json_object_responses_parse(oai: openai.OpenAI):
    for seed in range(3):
        reply = oai.chat.completions.create(model="tiny", messages=ASK, response_format={"type": "json_object"},
                                            temperature=1.0, seed=seed, max_tokens=1024)
        assert reply.choices[0].finish_reason in ("stop", "length")
        if reply.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(reply.choices[0].message.content), dict)


def test_streamed_json_schema_validates(oai: openai.OpenAI):
    chunks = oai.chat.completions.create(model="tiny", messages=ASK, response_format=_schema_format("nested"),
                                         temperature=1.0, seed=5, max_tokens=1024, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    jsonschema.validate(json.loads(text), SCHEMAS["nested"])


def test_responses_text_format_validates(oai: openai.OpenAI):
    # Thinking off (effort none): a random model's free thinking may not end within the tokens.
    reply = oai.responses.create(model="tiny", input="Weather as JSON.", max_output_tokens=1024, temperature=1.0,
                                 reasoning={"effort": "none"},
                                 text={"format": {"type": "json_schema", "name": "w", "schema": SCHEMAS["enum_and_bool"]}})
    jsonschema.validate(json.loads(reply.output_text), SCHEMAS["enum_and_bool"])


def test_an_unsupported_keyword_is_a_400_naming_it(server: LiveServer):
    bad = {"type": "object", "properties": {"a": {"type": "string"}}, "if": {"required": ["a"]}}
    reply = httpx.post(server.base_url + "/v1/chat/completions", timeout=60, json={
        "model": "tiny", "messages": ASK,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": bad}}})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "response_format.json_schema.schema" and '"if"' in error["message"], error


@pytest.mark.parametrize("response_format", [{"type": "yaml"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": 3}}])
def test_malformed_response_formats_are_400s(server: LiveServer, response_format):
    reply = httpx.post(server.base_url + "/v1/chat/completions", timeout=60,
                       json={"model": "tiny", "messages": ASK, "response_format": response_format})
    assert reply.status_code == 400 and reply.json()["error"]["param"].startswith("response_format"), reply.text


@pytest.mark.parametrize("thinking", [True, False])
def test_a_thinking_model_thinks_freely_then_answers_in_json(oai: openai.OpenAI, thinking):
    for seed in range(3):
        reply = oai.chat.completions.create(model="demo", messages=ASK, response_format=_schema_format("enum_and_bool"),
                                            temperature=1.0, seed=seed, max_tokens=1024,
                                            extra_body={"chat_template_kwargs": {"enable_thinking": thinking}})
        message = reply.choices[0].message
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(message.content), SCHEMAS["enum_and_bool"])
        if not thinking:
            assert not message.model_extra.get("reasoning_content")


def test_anthropic_output_config_format_validates(claude):
    for _ in range(2):
        # Thinking off: a random model's free thinking may not end within max_tokens.
        message = claude.messages.create(model="tiny", max_tokens=1024, messages=ASK, thinking={"type": "disabled"},
                                         output_config={"format": {"type": "json_schema", "schema": SCHEMAS["nested"]}})
        assert message.stop_reason == "end_turn"
        (text,) = [block.text for block in message.content if block.type == "text"]  # after any thinking block
        jsonschema.validate(json.loads(text), SCHEMAS["nested"])


def test_anthropic_unsupported_keyword_is_its_400(claude):
    import anthropic

    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model="tiny", max_tokens=16, messages=ASK,
                               output_config={"format": {"type": "json_schema", "schema": {"type": "object", "not": {}}}})
    assert caught.value.body["error"]["type"] == "invalid_request_error" and '"not"' in caught.value.body["error"]["message"]
