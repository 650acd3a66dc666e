"""``auto`` cases: the format is sniffed from the output."""

from parser_case_common import call, case

P = "auto"
W = '{"name": "get_weather", "arguments": {"city": "Paris"}}'

CASES = [
    case("auto/hermes", f"Let me check.\n<tool_call>\n{W}\n</tool_call>", parser=P, content="Let me check.",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/qwen3-coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
         "</tool_call>", parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
         parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/glm-zero-arg", "<tool_call>get_time</tool_call>", parser=P, calls=[call("get_time")]),
    case("auto/kimi", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}"
         "<|tool_call_end|><|tool_calls_section_end|>", parser=P, calls=[call("get_time", id="functions.get_time:0")]),
    case("auto/mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', parser=P,
         calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/deepseek", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/minimax", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
         "</invoke>\n</minimax:tool_call>", parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/harmony", "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hi.<|return|>",
         parser=P, reasoning="hm", content="Hi."),
    case("auto/jamba-vs-m1", f"<tool_calls>[{W}]</tool_calls>", parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/bare-json-with-tools", W, parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/bare-json-without-tools", W, parser=P, tools=None, content=W),
    case("auto/pythonic-offered", '[get_weather(city="Paris")]', parser=P, calls=[call("get_weather", {"city": "Paris"})]),
    case("auto/pythonic-unknown-stays-text", '[foo(x=1)]', parser=P, content="[foo(x=1)]"),
    case("auto/plain", "No tools needed; the answer is 42.", parser=P, content="No tools needed; the answer is 42."),
    case("auto/marker-in-prose", "The <tool_call> tag starts a call.", parser=P, content="The <tool_call> tag starts a call."),
    case("auto/truncated", "<tool_call>\n<function=get_weather>\n<parameter=city>\nPa", parser=P, truncated=True,
         content="<tool_call>\n<function=get_weather>\n<parameter=city>\nPa"),
]
