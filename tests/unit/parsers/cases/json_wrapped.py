"""Granite, Granite-20B-FC, Phi-4-mini, xLAM, Hunyuan, Jamba, InternLM, Apertus, GigaChat 3 cases."""

from parser_case_common import call, case

W = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
T = '{"name": "get_time", "arguments": {}}'

CASES = [
    case("granite/array", f"<|tool_call|>[{W}, {T}]", parser="granite",
         calls=[call("get_weather", {"city": "Paris"}), call("get_time")]),
    case("granite/text-tag", f"<tool_call>[{W}]</tool_call>", parser="granite", calls=[call("get_weather", {"city": "Paris"})]),
    case("granite/reasoning-32", "Here is my thought process: weather needed. Here is my response: <|tool_call|>"
         f"[{W}]", parser="granite", reasoning_parser="granite", reasoning="weather needed.",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("granite/reasoning-33", "<think>short</think><response>Hello there.</response>", parser="granite",
         reasoning_parser="granite", reasoning="short", content="Hello there."),
    case("granite/truncated", '<|tool_call|>[{"name": "get_weather", "arguments": {"ci', parser="granite",
         truncated=True, content='<|tool_call|>[{"name": "get_weather", "arguments": {"ci'),
    case("granite-20b-fc/repeated", f"<function_call> {W} <function_call> {T}", parser="granite-20b-fc",
         calls=[call("get_weather", {"city": "Paris"}), call("get_time")]),
    case("phi4/functools", f"functools[{W}, {T}]", parser="phi4_mini_json",
         calls=[call("get_weather", {"city": "Paris"}), call("get_time")]),
    case("phi4/text-before", f"Let me call.functools[{W}]<|end|>", parser="phi4_mini_json", content="Let me call.",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("xlam/bare-array", f"[{W}, {T}]", parser="xlam", calls=[call("get_weather", {"city": "Paris"}), call("get_time")]),
    case("xlam/fenced", f"```json\n[{W}]\n```", parser="xlam", calls=[call("get_weather", {"city": "Paris"})]),
    case("xlam/after-think", f"<think>call it</think>[{W}]", parser="xlam", reasoning_parser="qwen3",
         reasoning="call it", calls=[call("get_weather", {"city": "Paris"})]),
    case("xlam/tool-calls-marker", f"[TOOL_CALLS][{W}]", parser="xlam", calls=[call("get_weather", {"city": "Paris"})]),
    case("xlam/plain-answer", "The answer is 4.", parser="xlam", content="The answer is 4."),
    case("xlam/json-answer", '[{"id": 1}]', parser="xlam", content='[{"id": 1}]'),
    case("hunyuan/answer-wrapped", f"<think>\nneed weather\n</think>\n<answer>\n<tool_calls>[{W}]</tool_calls>\n</answer>",
         parser="hunyuan_a13b", reasoning_parser="hunyuan_a13b", reasoning="need weather",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("hunyuan/non-ascii", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "北京"}}]</tool_calls>',
         parser="hunyuan_a13b", calls=[call("get_weather", {"city": "北京"})]),
    case("hunyuan/plain-answer", "<think>\nsimple\n</think>\n<answer>\nIt is 4.\n</answer>", parser="hunyuan_a13b",
         reasoning_parser="hunyuan_a13b", reasoning="simple", content="It is 4."),
    case("jamba/array", f"<tool_calls>[{W}, {T}]</tool_calls>", parser="jamba",
         calls=[call("get_weather", {"city": "Paris"}), call("get_time")]),
    case("internlm/plugin", 'Sure.<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "X"}}'
         "<|action_end|><|im_end|>", parser="internlm", content="Sure.", calls=[call("get_weather", {"city": "X"})]),
    case("internlm/interpreter-not-call", "<|action_start|><|interpreter|>print(1)<|action_end|>", parser="internlm",
         content="<|action_start|><|interpreter|>print(1)<|action_end|>"),
    case("internlm/unknown-tool", '<|action_start|><|plugin|>{"name": "hack", "parameters": {}}<|action_end|>',
         parser="internlm", calls=[call("hack", offered=False)]),
    case("apertus/name-keyed", '<|tools_prefix|>[{"get_weather": {"city": "Bern"}}, {"get_time": {}}]<|tools_suffix|>',
         parser="apertus", calls=[call("get_weather", {"city": "Bern"}), call("get_time")]),
    case("apertus/missing-suffix", '<|tools_prefix|>[{"get_weather": {"city": "Bern"}}]', parser="apertus",
         calls=[call("get_weather", {"city": "Bern"})]),
    case("gigachat3/role-sep", f"function call<|role_sep|>\n{W}", parser="gigachat3",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("gigachat3/text-then-call", f"Checking.<|message_sep|><|function_call|>{T}</s>", parser="gigachat3",
         content="Checking.", calls=[call("get_time")]),
]
