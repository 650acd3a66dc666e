"""A model's grammar cache: a repeated response format or tool set is built and checked once;
requests that would build different grammars never share an entry."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from engines.demo.build import ARTIFACT_DIR
from router.errors import InvalidRequestError
from router.handle import ModelHandle
from router.turn.grammar_cache import GrammarCache
from router.turn.parser_choice import ParserChoice
from router.turn.structured import OutputFormat, output_grammar
from router.turn.tool_grammar import lazy_tool_call_grammar, tool_call_grammar
from router.turn.turn import ToolChoice, TurnRequest, _grammar

TOKENIZER = AutoTokenizer.from_pretrained(ARTIFACT_DIR)  # <think>, <tool_call> are added tokens
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "days": {"type": "integer"}},
          "required": ["city"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}


def fmt(schema=SCHEMA, kind="json_schema", param="response_format.json_schema.schema") -> OutputFormat:
    return OutputFormat(kind, schema if kind == "json_schema" else None, param=param)


def test_a_repeated_response_format_is_built_and_checked_once():
    cache = GrammarCache()
    first = cache.output_grammar(fmt(), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking="maybe")
    again = cache.output_grammar(fmt(dict(SCHEMA)), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking="maybe")
    assert first == again == output_grammar(fmt(), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking="maybe")
    assert (cache.misses, cache.hits, cache.schema_checks) == (1, 1, 1)


def test_a_repeated_agent_turn_hits_the_cache_through_the_turn():
    """The wiring: ``turn._grammar`` asks the handle's cache, and a second identical turn builds nothing."""
    handle = ModelHandle("m", config=None, created=0, tokenizer=TOKENIZER, parsers=ParserChoice("hermes", "pinned", "qwen3", "pinned"))
    request = TurnRequest(messages=[], tools=[WEATHER, TIME], tool_choice=ToolChoice("required"))
    prompt = "<|im_start|>assistant\n"
    grammars = [_grammar(handle, request, request.tools, prompt) for _ in range(3)]
    assert grammars[0] and grammars[0] == grammars[1] == grammars[2]
    assert (handle.grammars.misses, handle.grammars.hits, handle.grammars.schema_checks) == (1, 2, 2)  # two tool schemas
    assert _grammar(handle, request, request.tools, prompt + "<think>\n") != grammars[0]  # thinking opened: another entry
    assert handle.grammars.misses == 2


FORMATS = [  # (format, reasoning parser, thinking): each builds its own grammar
    (fmt(), None, "maybe"),
    (fmt({**SCHEMA, "properties": dict(reversed(SCHEMA["properties"].items()))}), None, "maybe"),  # property order
    (fmt({**SCHEMA, "properties": {**SCHEMA["properties"], "city": {"type": "string", "maxLength": 11}}}), None, "maybe"),
    (fmt({**SCHEMA, "properties": {**SCHEMA["properties"], "days": {"type": "integer", "maximum": 1}}}), None, "maybe"),
    (fmt({**SCHEMA, "properties": {**SCHEMA["properties"], "days": {"type": "integer", "maximum": 1.0}}}), None, "maybe"),
    (fmt(kind="json_object"), None, "maybe"),
    (fmt(), "qwen3", "maybe"),
    (fmt(), "qwen3", "open"),
    (fmt(), "qwen3", "closed"),
    (fmt(), "mistral", "maybe"),
]


def test_response_formats_that_differ_never_share_an_entry():
    cache = GrammarCache()
    for _ in range(2):  # interleaved: every entry is asked for again after the others
        for output, reasoning, thinking in FORMATS:
            got = cache.output_grammar(output, tokenizer=TOKENIZER, reasoning_parser=reasoning, thinking=thinking)
            assert got == output_grammar(output, tokenizer=TOKENIZER, reasoning_parser=reasoning, thinking=thinking)
    assert (cache.misses, cache.hits, len(cache)) == (len(FORMATS), len(FORMATS), len(FORMATS))


TOOL_CASES = [  # (tools, mode, tool parser, named, parallel, reasoning parser, thinking)
    ([WEATHER, TIME], "required", "hermes", None, True, None, "maybe"),
    ([TIME, WEATHER], "required", "hermes", None, True, None, "maybe"),  # tool order
    ([WEATHER, TIME], "required", "hermes", None, False, None, "maybe"),
    ([WEATHER, TIME], "required", "hermes", "get_time", True, None, "maybe"),
    ([WEATHER, TIME], "required", "qwen3_coder", None, True, None, "maybe"),
    ([WEATHER, TIME], "required", "llama3_json", None, True, None, "maybe"),
    ([WEATHER, TIME], "required", "hermes", None, True, "qwen3", "maybe"),
    ([WEATHER, TIME], "required", "hermes", None, True, "qwen3", "closed"),
    ([WEATHER, {**TIME, "function": {**TIME["function"], "parameters": {"type": "object"}}}], "required", "hermes", None, True, None,
     "maybe"),
    ([WEATHER, TIME], "lazy", "hermes", None, True, None, "maybe"),
    ([WEATHER, TIME], "lazy", "qwen3_coder", None, True, None, "maybe"),
]


def direct(tools, mode, parser, named, parallel, reasoning, thinking) -> str:
    options = {"tool_parser": parser, "tokenizer": TOKENIZER, "reasoning_parser": reasoning, "thinking": thinking}
    if mode == "lazy":
        return lazy_tool_call_grammar(tools, **options) or ""
    return tool_call_grammar(tools, named=named, parallel=parallel, **options) or ""


def test_tool_sets_and_options_that_differ_never_share_an_entry():
    cache = GrammarCache()
    for _ in range(2):
        for tools, mode, parser, named, parallel, reasoning, thinking in TOOL_CASES:
            got = cache.tool_grammar(tools, mode=mode, tool_parser=parser, named=named, parallel=parallel, tokenizer=TOKENIZER,
                                     reasoning_parser=reasoning, thinking=thinking)
            assert got.problem is None and got.grammar
            assert got.grammar == direct(tools, mode, parser, named, parallel, reasoning, thinking)
    assert (cache.misses, cache.hits, len(cache)) == (len(TOOL_CASES), len(TOOL_CASES), len(TOOL_CASES))
    assert cache.schema_checks == 3  # SCHEMA, TIME's and the bare object: each compiled once whatever the grammars


def test_an_unenforceable_schema_is_a_400_at_each_requests_own_field_checked_once():
    cache = GrammarCache()
    schema = {"type": "array", "uniqueItems": True}
    for param in ("response_format.json_schema.schema", "text.format.schema"):
        with pytest.raises(InvalidRequestError) as caught:
            cache.output_grammar(fmt(schema, param=param), tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe")
        assert caught.value.param == param and '"uniqueItems"' in str(caught.value)
    assert cache.schema_checks == 1 and len(cache) == 0


def test_a_tool_schema_the_engine_cannot_enforce_keeps_prompting():
    cache = GrammarCache()
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {"required": ["a"]}}}}
    for _ in range(2):
        built = cache.tool_grammar([bad, TIME], mode="required", tool_parser="hermes", named=None, parallel=True,
                                   tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe")
        assert built.grammar == "" and '"not"' in built.problem
    assert (cache.misses, cache.hits) == (1, 1)
    named = cache.tool_grammar([bad, TIME], mode="required", tool_parser="hermes", named="get_time", parallel=True,
                               tokenizer=TOKENIZER, reasoning_parser=None, thinking="maybe")
    assert named.problem is None and named.grammar  # the bad tool is not the one required


def test_the_cache_is_bounded_least_recently_used_first():
    cache = GrammarCache(max_entries=2)
    ask = [lambda t=thinking: cache.output_grammar(fmt(), tokenizer=TOKENIZER, reasoning_parser="qwen3", thinking=t)
           for thinking in ("maybe", "open", "closed")]
    ask[0](), ask[1](), ask[0](), ask[2]()  # "open" is the least recently used when "closed" comes
    assert len(cache) == 2 and cache.misses == 3
    ask[0]()
    assert cache.hits == 2
    ask[1]()
    assert cache.misses == 4


def test_another_tokenizer_never_reads_the_first_ones_grammars():
    cache = GrammarCache()
    other = AutoTokenizer.from_pretrained(ARTIFACT_DIR)
    for tokenizer in (TOKENIZER, other, TOKENIZER):
        cache.output_grammar(fmt(), tokenizer=tokenizer, reasoning_parser="qwen3", thinking="maybe")
    assert (cache.misses, cache.hits, cache.schema_checks) == (3, 0, 1)
