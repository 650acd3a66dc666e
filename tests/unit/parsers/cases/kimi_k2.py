"""Kimi K2 cases: native ids, sections, bare counters, thinking closed by a tool section."""

from parser_case_common import call, case

P = "kimi_k2"
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def c(header, args):
    return f"<|tool_call_begin|>{header}<|tool_call_argument_begin|>{args}<|tool_call_end|>"


CASES = [
    case("kimi/single", SB + c("functions.get_weather:0", '{"city": "Beijing"}') + SE + "<|im_end|>", parser=P,
         calls=[call("get_weather", {"city": "Beijing"}, id="functions.get_weather:0")]),
    case("kimi/parallel", "Sure." + SB + c("functions.get_weather:3", '{"city": "北京"}') + "\n"
         + c("functions.get_time:4", "{}") + SE, parser=P, content="Sure.",
         calls=[call("get_weather", {"city": "北京"}, id="functions.get_weather:3"),
                call("get_time", id="functions.get_time:4")]),
    case("kimi/no-prefix", SB + c("get_weather:0", '{"city": "X", "days": null}') + SE, parser=P,
         calls=[call("get_weather", {"city": "X", "days": None}, id="get_weather:0")]),
    case("kimi/bare-counter-inferred", SB + c("0", '{"path": "a.txt", "content": "hi"}') + SE, parser=P,
         calls=[call("write_file", {"path": "a.txt", "content": "hi"}, id="0")]),
    # vLLM keeps a bare counter as the call id; a counter already used gets a fresh id.
    case("kimi/bare-counter-id-kept", "Checking. " + SB + c(" 4 ", '{"city": "Lima"}') + SE, parser=P,
         content="Checking.", calls=[call("get_weather", {"city": "Lima"}, id="4")]),
    case("kimi/bare-counter-id-reused", SB + c("1", '{"city": "Lima"}') + c("1", '{"path": "b", "content": ""}')
         + SE, parser=P, calls=[call("get_weather", {"city": "Lima"}, id="1"),
                                call("write_file", {"path": "b", "content": ""})]),
    case("kimi/bare-counter-ambiguous", SB + c("0", '{"x": 1}') + SE, parser=P,
         content=c("0", '{"x": 1}')),
    case("kimi/duplicate-native-id", SB + c("functions.get_time:0", "{}") + c("functions.get_time:0", "{}") + SE,
         parser=P, calls=[call("get_time", id="functions.get_time:0"), call("get_time")]),
    case("kimi/thinking-implicit-end", "<think>Need to call the tool." + SB + c("functions.get_time:0", "{}") + SE,
         parser=P, reasoning_parser="kimi_k2", reasoning="Need to call the tool.",
         calls=[call("get_time", id="functions.get_time:0")]),
    case("kimi/thinking-closed", "<think>Plan.</think>Answer first." + SB + c("functions.get_time:1", "{}") + SE,
         parser=P, reasoning_parser="kimi_k2", reasoning="Plan.", content="Answer first.",
         calls=[call("get_time", id="functions.get_time:1")]),
    case("kimi/typed-nested", SB + c("functions.search:0", '{"query": "q", "filters": {"n": [1, 2.0]}, "exact": false}') + SE,
         parser=P, calls=[call("search", {"query": "q", "filters": {"n": [1, 2.0]}, "exact": False},
                               id="functions.search:0")]),
    case("kimi/truncated", SB + '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Bei',
         parser=P, truncated=True,
         content='<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Bei'),
    case("kimi/invalid-id-skipped", "Help. " + SB + c("functions.invalid.0", '{"city": "Beijing"}')
         + c("functions.get_weather:1", '{"city": "Shanghai"}') + SE, parser=P, content="Help.",
         calls=[call("get_weather", {"city": "Shanghai"}, id="functions.get_weather:1")]),
    case("kimi/invalid-id-no-counter-skipped", SB + c("functions.get_time", "{}") + c("get_time:2", "{}")
         + c("get weather:3", '{"city": "X"}') + SE + "<|im_end|>", parser=P,
         calls=[call("get_time", id="get_time:2")]),
    case("kimi/invalid-id-only-call", "Ok." + SB + c("functions.get_time.0", "{}") + SE, parser=P, content="Ok."),
    case("kimi/noise-in-section-dropped", "Reasoning done. " + SB + " spurious header " + c("functions.get_time:0", "{}")
         + " junk between calls " + c("functions.get_weather:1", '{"city": "Rome"}') + "trailing junk" + SE
         + "<|im_end|>", parser=P, content="Reasoning done.",
         calls=[call("get_time", id="functions.get_time:0"),
                call("get_weather", {"city": "Rome"}, id="functions.get_weather:1")]),
    case("kimi/text-after-section-kept", SB + c("functions.get_time:0", "{}") + "noise" + SE + "Here you go.", parser=P,
         content="Here you go.", calls=[call("get_time", id="functions.get_time:0")]),
    case("kimi/text-after-bare-call-kept", c("functions.get_time:0", "{}") + " The time follows.", parser=P,
         content="The time follows.", calls=[call("get_time", id="functions.get_time:0")]),
    case("kimi/section-cut-after-call", SB + c("functions.get_time:0", "{}") + "\nmore noise", parser=P,
         calls=[call("get_time", id="functions.get_time:0")]),
    case("kimi/truncated-second-call", SB + c("functions.get_time:0", "{}") + " x "
         + '<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{"city": "Ro', parser=P, truncated=True,
         content='<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{"city": "Ro',
         calls=[call("get_time", id="functions.get_time:0")]),
    case("kimi/singular-section", "<|tool_call_section_begin|>" + c("functions.get_time:0", "{}")
         + "<|tool_call_section_end|>", parser=P, calls=[call("get_time", id="functions.get_time:0")]),
    # SGLang test_function_call_parser (TestKimiK2Detector.test_invalid_tool_call): no call begins, so the
    # whole text is content, markers included (vLLM's kimi_k2 parser also returns it unchanged).
    case("kimi/invalid-call-without-begin", 'invalid_tool:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
         + SE, parser=P, content='invalid_tool:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>' + SE),
    case("kimi/section-end-after-bare-call-dropped", c("functions.get_time:0", "{}") + SE + "Done.", parser=P,
         content="Done.", calls=[call("get_time", id="functions.get_time:0")]),
]
