"""Response formats → grammars: the API shapes, the 400s, and where the reasoning ends."""

from __future__ import annotations

import llguidance
import llguidance.hf
import pytest
from transformers import AutoTokenizer

from engines.demo.build import ARTIFACT_DIR
from router.errors import InvalidRequestError
from router.turn.fields import openai_path
from router.turn.structured import OutputFormat, chat_response_format, output_grammar, responses_text_format, thinking_state

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}
TOKENIZER = AutoTokenizer.from_pretrained(ARTIFACT_DIR)  # <think> and </think> are added tokens
LLT = llguidance.hf.from_tokenizer(TOKENIZER)


def accepts(grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(LLT, grammar)
    return matcher.consume_tokens(TOKENIZER.encode(text, add_special_tokens=False)) and matcher.is_accepting()


def test_chat_response_format_shapes():
    at = openai_path("response_format")
    assert chat_response_format(None, at) is None and chat_response_format({"type": "text"}, at) is None
    assert chat_response_format({"type": "json_object"}, at) == OutputFormat("json_object", param="response_format")
    fmt = chat_response_format({"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA, "strict": True}}, at)
    assert fmt == OutputFormat("json_schema", SCHEMA, "w", param="response_format.json_schema.schema")


@pytest.mark.parametrize(("value", "param"), [
    ({"type": "yaml"}, "response_format.type"),
    ({}, "response_format.type"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "w"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"schema": SCHEMA, "strict": "yes"}}, "response_format.json_schema.strict"),
    ("json", "response_format"),
])
def test_malformed_chat_formats_name_the_field(value, param):
    with pytest.raises(InvalidRequestError) as caught:
        chat_response_format(value, openai_path("response_format"))
    assert caught.value.param == param


def test_responses_text_format_is_flat():
    fmt = responses_text_format({"format": {"type": "json_schema", "name": "w", "schema": SCHEMA}}, openai_path("text"))
    assert fmt == OutputFormat("json_schema", SCHEMA, "w", param="text.format.schema")
    assert responses_text_format({"format": {"type": "text"}}, openai_path("text")) is None
    assert responses_text_format({"verbosity": "low"}, openai_path("text")) is None


@pytest.mark.parametrize(("keyword", "schema"), [
    ("if", {"type": "object", "if": {"required": ["a"]}, "then": {}}),
    ("not", {"type": "object", "not": {"required": ["a"]}}),
    ("uniqueItems", {"type": "array", "uniqueItems": True}),
    ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}),
])
def test_an_unenforceable_keyword_is_a_400_naming_it(keyword, schema):
    fmt = OutputFormat("json_schema", schema, param="response_format.json_schema.schema")
    with pytest.raises(InvalidRequestError) as caught:
        output_grammar(fmt, tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe")
    assert caught.value.param == "response_format.json_schema.schema" and f'"{keyword}"' in str(caught.value)


def test_json_only_without_a_reasoning_parser():
    grammar = output_grammar(OutputFormat("json_schema", SCHEMA), tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe")
    assert accepts(grammar, '{"city": "Lisbon"}') and accepts(grammar, '{\n  "city": "Lisbon"\n}')
    assert not accepts(grammar, '{"city": "Lisbon", "x": 1}') and not accepts(grammar, '<think>x</think>{"city": "a"}')
    assert not accepts(grammar, '{"city":     "Lisbon"}')  # no padding without end


def test_reasoning_stays_free_then_the_answer_is_constrained():
    maybe = output_grammar(OutputFormat("json_object"), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking="maybe")
    assert accepts(maybe, '<think>I think {not json} here.</think>\n\n{"a": 1}') and accepts(maybe, '{"a": 1}')
    opened = output_grammar(OutputFormat("json_object"), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking="open")
    assert accepts(opened, 'still thinking</think>\n{"a": 1}') and not accepts(opened, '{"a": 1}')
    closed = output_grammar(OutputFormat("json_object"), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking="closed")
    assert accepts(closed, '{"a": 1}') and not accepts(closed, '<think>x</think>{"a": 1}')


def test_a_text_close_tag_ends_the_thinking_at_its_first_occurrence():
    grammar = output_grammar(OutputFormat("json_object"), tokenizer=TOKENIZER, reasoning_parser="mistral", thinking="maybe")
    assert accepts(grammar, '[THINK]plan[/THINK]{"a": 1}') and not accepts(grammar, '[THINK]plan[/THINK]junk{"a": 1}')


def test_thinking_state_reads_the_prompt_end():
    assert thinking_state("<|im_start|>assistant\n<think>\n", "qwen3") == "open"
    assert thinking_state("<|im_start|>assistant\n<think>\n\n</think>\n\n", "qwen3") == "closed"
    assert thinking_state("<|im_start|>assistant\n", "qwen3") == "maybe"
    assert thinking_state("<|im_start|>assistant\n<think>\n", None) == "maybe"
