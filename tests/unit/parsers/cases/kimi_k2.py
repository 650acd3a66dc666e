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
         calls=[call("write_file", {"path": "a.txt", "content": "hi"})]),
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
    case("kimi/singular-section", "<|tool_call_section_begin|>" + c("functions.get_time:0", "{}")
         + "<|tool_call_section_end|>", parser=P, calls=[call("get_time", id="functions.get_time:0")]),
]
