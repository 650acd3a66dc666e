"""tool_choice required / named → the family's own call format, arguments by their schemas."""

from __future__ import annotations

import llguidance
import llguidance.hf
import pytest
from transformers import AutoTokenizer

from engines.demo.build import ARTIFACT_DIR
from parsers import parse_output
from router.turn.tool_grammar import GRAMMAR_FAMILIES, lazy_tool_call_grammar, tool_call_grammar

TOKENIZER = AutoTokenizer.from_pretrained(ARTIFACT_DIR)  # <tool_call> and </tool_call> are added tokens
LLT = llguidance.hf.from_tokenizer(TOKENIZER)
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "days": {"type": "integer", "minimum": 1},
                                            "unit": {"enum": ["C", "F"]}},
           "required": ["city"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time"}}]
CALLS = {
    "hermes": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}\n</tool_call>',
               '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', "\n"),
    "llama3_json": ('{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "C"}}', '{"name": "get_time", "parameters": {}}', "; "),
    "qwen3_coder": ("<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=unit>\nC\n</parameter>\n"
                    "</function>\n</tool_call>", "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", "\n"),
}


def grammar(family, *, named=None, parallel=True, reasoning=None, thinking="maybe"):
    return tool_call_grammar(TOOLS, tool_parser=family, named=named, parallel=parallel, tokenizer=TOKENIZER,
                             reasoning_parser=reasoning, thinking=thinking)


def accepts(grammar_text: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(LLT, grammar_text)
    return matcher.consume_tokens(TOKENIZER.encode(text, add_special_tokens=False)) and matcher.is_accepting()


def test_the_families_with_a_grammar():
    assert set(GRAMMAR_FAMILIES) == {*CALLS, "qwen3_xml"}


@pytest.mark.parametrize("family", sorted(CALLS))
def test_calls_in_the_family_format_and_what_its_parser_reads(family):
    weather, time, sep = CALLS[family]
    required = grammar(family)
    assert accepts(required, weather) and accepts(required, time) and accepts(required, weather + sep + time)
    assert not accepts(required, "I will not call a tool.")
    assert not accepts(required, weather.replace("Oslo", "Oslo is a city in Norway"))  # past maxLength
    assert not accepts(required, weather.replace('"C"', '"K"').replace("\nC\n", "\nK\n"))  # not in the enum
    parsed = parse_output(weather + sep + time, tool_parser=family, tools=TOOLS)
    assert [c["name"] for c in parsed["tool_calls"]] == ["get_weather", "get_time"]
    assert parsed["tool_calls"][0]["arguments"] == {"city": "Oslo", "unit": "C"}


@pytest.mark.parametrize("family", sorted(CALLS))
def test_named_and_single_calls(family):
    weather, time, sep = CALLS[family]
    named = grammar(family, named="get_time")
    assert accepts(named, time) and not accepts(named, weather)
    single = grammar(family, parallel=False)
    assert accepts(single, weather) and not accepts(single, weather + sep + time)


def test_the_call_follows_the_reasoning():
    with_think = grammar("hermes", reasoning="qwen3")
    assert accepts(with_think, "<think>Call it.</think>\n" + CALLS["hermes"][0])
    assert not accepts(grammar("hermes", reasoning="qwen3", thinking="closed"), "<think>x</think>" + CALLS["hermes"][0])


@pytest.mark.parametrize("family", ["mistral", "kimi_k2", "auto", None, "no-such-parser"])
def test_families_without_a_grammar_keep_prompting(family):
    assert grammar(family) is None


@pytest.mark.parametrize("family", ["hermes", "qwen3_coder"])
def test_strict_tools_leave_text_free_and_constrain_an_opened_call(family):
    weather, _, _ = CALLS[family]
    lazy = lazy_tool_call_grammar(TOOLS, tool_parser=family, tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe")
    assert accepts(lazy, "No call needed: it is sunny.") and accepts(lazy, "Checking. " + weather + " Done.")
    assert not accepts(lazy, "Checking. " + weather.replace("Oslo", "Oslo is a city in Norway"))


def test_bare_json_calls_have_no_marker_to_start_a_lazy_grammar():
    assert lazy_tool_call_grammar(TOOLS, tool_parser="llama3_json", tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe") is None
