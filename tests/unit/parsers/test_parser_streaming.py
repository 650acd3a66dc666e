"""The streaming contract the router relies on, beyond what the case table checks."""

from __future__ import annotations

import re
import time

import pytest

from parsers import (
    ContentDelta,
    OutputParser,
    ReasoningDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    dump_arguments,
    events_to_result,
    make_output_parser,
)

WRITE = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
BIG = "".join(f"line {i}: print('x \"{i}\"')\n    indented\t tab é 北\n" for i in range(400))


def feed_all(parser, chunks):
    events = []
    per_chunk = []
    for chunk in chunks:
        new = parser.feed(chunk)
        per_chunk.append(new)
        events.extend(new)
    events.extend(parser.finish())
    return events, per_chunk


def chunked(text, size):
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize(("parser", "text"), [
    ("hermes", '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", "content": '
               + dump_arguments({"c": BIG})[5:-1] + "}}\n</tool_call>"),
    ("qwen3_coder", f"<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n"
                    f"<parameter=content>\n{BIG}\n</parameter>\n</function>\n</tool_call>"),
    ("llama3_json", '{"name": "write_file", "parameters": {"path": "a.py", "content": '
                    + dump_arguments({"c": BIG})[5:-1] + "}}"),
    ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>"
                '{"path": "a.py", "content": ' + dump_arguments({"c": BIG})[5:-1] + "}<|tool_call_end|>"),
    ("mistral", '[TOOL_CALLS]write_file[ARGS]{"path": "a.py", "content": ' + dump_arguments({"c": BIG})[5:-1] + "}"),
    ("minimax_m2", '<minimax:tool_call>\n<invoke name="write_file">\n<parameter name="path">a.py</parameter>\n'
                   f'<parameter name="content">{BIG}</parameter>\n</invoke>\n</minimax:tool_call>'),
])
def test_big_string_arguments_stream_incrementally(parser, text):
    """Long edits arrive as many argument deltas, long before the call closes."""
    p = make_output_parser(tool_parser=parser, tools=WRITE)
    events, per_chunk = feed_all(p, chunked(text, 64))
    deltas = [e for e in events if isinstance(e, ToolCallArgsDelta)]
    assert len(deltas) > 50
    end = next(i for i, chunk in enumerate(per_chunk) if any(isinstance(e, ToolCallEnd) for e in chunk))
    first = next(i for i, chunk in enumerate(per_chunk) if any(isinstance(e, ToolCallArgsDelta) for e in chunk))
    assert first < end / 4
    result = events_to_result(events)
    assert result["tool_calls"][0]["arguments"] == {"path": "a.py", "content": BIG}
    assert "".join(d.text for d in deltas) == dump_arguments({"path": "a.py", "content": BIG})


def test_start_carries_complete_name_and_id_first():
    p = make_output_parser(tool_parser="hermes", tools=WRITE)
    events, _ = feed_all(p, list('<tool_call>{"name": "write_file", "arguments": {"path": "x"}}</tool_call>'))
    kinds = [type(e) for e in events]
    assert kinds[0] is ToolCallStart and kinds[-1] is ToolCallEnd
    assert events[0].name == "write_file" and re.fullmatch(r"call_[A-Za-z0-9]{24}", events[0].id)


def test_split_marker_is_held_back_not_leaked():
    p = make_output_parser(tool_parser="hermes", tools=WRITE)
    assert p.feed("Working on it <tool_") == [ContentDelta("Working on it")]
    assert p.feed("ca") == []
    out = p.feed('ll>{"name": "write_file", "arguments": {}}</tool_call>') + p.finish()
    assert not any(isinstance(e, ContentDelta) for e in out)


def test_plain_text_is_emitted_as_it_comes():
    p = make_output_parser(tool_parser="qwen3_coder", reasoning_parser="qwen3")
    assert p.feed("Hello") == [ContentDelta("Hello")]
    assert p.feed(" world") == [ContentDelta(" world")]
    assert p.feed("\n") == []  # trailing whitespace waits: it may be the end
    assert p.feed("Bye") == [ContentDelta("\nBye")]
    assert p.finish() == []


@pytest.mark.parametrize("family", ["hermes", "xlam"])
def test_an_answers_code_fence_streams_before_it_closes(family):
    """Fenced calls are read whole (a ```json fence holding a call), but a fence whose body
    cannot be one goes out as it arrives, not when the fence closes."""
    body = "".join(f"line {i} of an answer's code\n" for i in range(40))
    text = "Here:\n```json\n" + body + "```\nDone."
    _, per_chunk = feed_all(make_output_parser(tool_parser=family, reasoning_parser=None, tools=WRITE), chunked(text, 16))
    before_close = "".join(e.text for chunk in per_chunk[: len(text[: text.rindex("```")]) // 16] for e in chunk
                           if isinstance(e, ContentDelta))
    assert "line 30 of an answer's code" in before_close


def test_reasoning_streams_before_content():
    p = make_output_parser(tool_parser="hermes", reasoning_parser="qwen3", thinking_forced_open=True)
    events, _ = feed_all(p, ["Let me ", "think.", "</th", "ink>\n\nAnswer."])
    assert events == [ReasoningDelta("Let me"), ReasoningDelta(" think."), ContentDelta("Answer.")]


def test_abandoned_call_comes_back_as_content_and_sets_truncated():
    p = make_output_parser(tool_parser="hermes", tools=WRITE)
    text = '<tool_call>{"name": "write_file", "arguments": {"path": "a.py", "content": "import o'
    events, _ = feed_all(p, chunked(text, 7))
    assert isinstance(events[0], ToolCallStart)
    assert not any(isinstance(e, ToolCallEnd) for e in events)
    assert events_to_result(events) == {"content": text, "reasoning": None, "tool_calls": []}
    assert p.truncated_call is True


def test_open_kimi_call_has_streamed_its_name_and_arguments_so_far():
    """SGLang's test_partial_tool_call: before the call ends, its name and argument text are out."""
    weather = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    p = make_output_parser(tool_parser="kimi_k2", tools=weather)
    head = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"
    events = p.feed(head) + p.feed('"city": "Paris"')
    assert events[0] == ToolCallStart(index=0, id="functions.get_weather:0", name="get_weather")
    assert "".join(e.text for e in events if isinstance(e, ToolCallArgsDelta)) == '{"city":"Paris"'
    assert not any(isinstance(e, ToolCallEnd) for e in events)
    tail = p.finish()
    assert p.truncated_call is True
    assert events_to_result(events + tail)["tool_calls"] == []


def test_parallel_calls_have_distinct_index_and_id():
    p = make_output_parser(tool_parser="hermes")
    one = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    events, _ = feed_all(p, [one * 5])
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [s.index for s in starts] == [0, 1, 2, 3, 4]
    assert len({s.id for s in starts}) == 5
    for index in range(5):
        assert "".join(e.text for e in events if isinstance(e, ToolCallArgsDelta) and e.index == index) == "{}"


def test_mistral_generates_nine_character_ids():
    p = make_output_parser(tool_parser="mistral")
    events, _ = feed_all(p, ["[TOOL_CALLS]f[ARGS]{}"])
    assert re.fullmatch(r"[A-Za-z0-9]{9}", events[0].id)


def test_output_parser_protocol_and_unknown_names():
    assert isinstance(make_output_parser(tool_parser="hermes"), OutputParser)
    assert isinstance(make_output_parser(tool_parser="openai"), OutputParser)
    with pytest.raises(ValueError, match="unknown tool parser"):
        make_output_parser(tool_parser="no_such_parser")
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        make_output_parser(tool_parser=None, reasoning_parser="no_such_parser")


def _feed_time(parser_name: str, text: str, size: int) -> float:
    p = make_output_parser(tool_parser=parser_name, reasoning_parser="qwen3", tools=WRITE)
    chunks = chunked(text, size)
    start = time.perf_counter()
    for chunk in chunks:
        p.feed(chunk)
    p.finish()
    return time.perf_counter() - start


@pytest.mark.parametrize("parser", ["hermes", "qwen3_coder", "auto", "mistral", "pythonic"])
def test_feed_is_linear_in_plain_text(parser):
    """No rescanning of the whole output per token: 4x the text costs ~4x, not 16x."""
    small = "Some answer text with <b>tags</b> and [brackets] {braces}, no calls. " * 150
    t_small = min(_feed_time(parser, small, 4) for _ in range(3))
    t_big = min(_feed_time(parser, small * 4, 4) for _ in range(3))
    assert t_big < 8 * t_small + 0.05


def test_streamed_xml_value_is_linear():
    body = "x = 1  # filler text\n" * 2000
    call = "<tool_call>\n<function=write_file>\n<parameter=content>\n{}\n</parameter>\n</function>\n</tool_call>"
    t_small = min(_feed_time("qwen3_coder", call.format(body), 8) for _ in range(3))
    t_big = min(_feed_time("qwen3_coder", call.format(body * 4), 8) for _ in range(3))
    assert t_big < 8 * t_small + 0.05


@pytest.mark.parametrize(("parser", "template"), [
    ("glm47", "<tool_call>write_file<arg_key>content</arg_key><arg_value>{}</arg_value></tool_call>"),
    ("gemma4", '<|tool_call>call:write_file{{content:<|"|>{}<|"|>}}<tool_call|>'),
    ("hermes", '<tool_call>{{"name": "write_file", "arguments": {{"content": "{}"}}}}</tool_call>'),
    ("openai", '<|channel|>commentary to=functions.write_file<|message|>{{"content": "{}"}}<|call|>'),
    ("auto", '{{"name": "write_file", "arguments": {{"content": "{}"}}}}'),
])
def test_buffered_blocks_are_linear(parser, template):
    """Buffered formats keep their body as parts: 4x the call costs ~4x."""
    body = "x = 1  # filler text " * 1500
    t_small = min(_feed_time(parser, template.format(body), 4) for _ in range(2))
    t_big = min(_feed_time(parser, template.format(body * 4), 4) for _ in range(2))
    assert t_big < 8 * t_small + 0.05
