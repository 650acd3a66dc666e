"""Mistral cases: v3 JSON arrays, v11+ name[ARGS], [CALL_ID], stripped control tokens, [THINK]."""

from parser_case_common import call, case

P = "mistral"

CASES = [
    case("mistral/v3-array",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}]</s>', parser=P,
         calls=[call("get_weather", {"city": "Paris"}, id="abcDEF123")]),
    case("mistral/v3-parallel",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "A"}, "id": "aaaaaaaa1"}, '
         '{"name": "get_time", "arguments": {}, "id": "bbbbbbbb2"}]', parser=P,
         calls=[call("get_weather", {"city": "A"}, id="aaaaaaaa1"), call("get_time", id="bbbbbbbb2")]),
    case("mistral/v3-id-first", '[TOOL_CALLS] [{"id": "ZZZ111aaa", "name": "get_time", "arguments": {}}]', parser=P,
         calls=[call("get_time", id="ZZZ111aaa")]),
    case("mistral/v3-no-id", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Nice"}}]', parser=P,
         calls=[call("get_weather", {"city": "Nice"})]),
    case("mistral/v11", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', parser=P,
         calls=[call("get_weather", {"city": "Paris"})]),
    case("mistral/v11-parallel", '[TOOL_CALLS]get_weather[ARGS]{"city": "A"}[TOOL_CALLS]get_time[ARGS]{}', parser=P,
         calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("mistral/call-id", '[TOOL_CALLS]get_weather[CALL_ID]abc123def[ARGS]{"city": "B"}', parser=P,
         calls=[call("get_weather", {"city": "B"}, id="abc123def")]),
    case("mistral/hf-mode", '[TOOL_CALLS]get_weather{"city": "C", "days": 3}', parser=P,
         calls=[call("get_weather", {"city": "C", "days": 3})]),
    case("mistral/no-control-tokens", 'get_weather{"city": "D"}', parser=P, calls=[call("get_weather", {"city": "D"})]),
    case("mistral/no-control-tokens-parallel", 'get_weather{"city": "D"}get_time{}', parser=P,
         calls=[call("get_weather", {"city": "D"}), call("get_time")]),
    case("mistral/no-control-tokens-v3", '[{"name": "get_weather", "arguments": {"city": "E"}}]', parser=P,
         calls=[call("get_weather", {"city": "E"})]),
    case("mistral/text-before", 'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "F"}', parser=P, content="Sure.",
         calls=[call("get_weather", {"city": "F"})]),
    case("mistral/text-after", "[TOOL_CALLS]get_time[ARGS]{} Done.", parser=P, content="Done.", calls=[call("get_time")]),
    case("mistral/typed-non-ascii",
         '[TOOL_CALLS]search[ARGS]{"query": "café ☕", "limit": 3, "filters": {"a": [true, null]}}', parser=P,
         calls=[call("search", {"query": "café ☕", "limit": 3, "filters": {"a": [True, None]}})]),
    case("mistral/magistral-think", '[THINK]Need weather.[/THINK][TOOL_CALLS]get_weather[ARGS]{"city": "G"}',
         parser=P, reasoning_parser="mistral", reasoning="Need weather.", calls=[call("get_weather", {"city": "G"})]),
    case("mistral/think-then-answer", "[THINK]2+2[/THINK]It is 4.", parser=P, reasoning_parser="mistral",
         reasoning="2+2", content="It is 4."),
    case("mistral/truncated", '[TOOL_CALLS]get_weather[ARGS]{"city": "Pa', parser=P, truncated=True,
         content='[TOOL_CALLS]get_weather[ARGS]{"city": "Pa'),
    case("mistral/word-not-call", "get_weather is a tool I have.", parser=P, content="get_weather is a tool I have."),
    # vLLM drops the control token when nothing parses (test_extract_tool_calls_pre_v11_regex_fallback_fails).
    case("mistral/marker-garbage", "[TOOL_CALLS] ??? nothing", parser=P, content="??? nothing"),
    case("mistral/unknown-tool", '[TOOL_CALLS]reboot[ARGS]{"now": true}', parser=P,
         calls=[call("reboot", {"now": True}, offered=False)]),
    # Pre-v11 bodies that are not JSON (vLLM test_mistral_tool_parser: ..._pre_v11_regex_fallback and
    # ..._regex_fallback_fails, trailing_data_after_json): the first "[{" is the call array, else the
    # text is content without the control token.
    case("mistral/v3-junk-before-array",
         '[TOOL_CALLS]  junk [{"name": "get_weather", "arguments":{"city": "A", "days": 2}}] trail', parser=P,
         content="trail", calls=[call("get_weather", {"city": "A", "days": 2})]),
    case("mistral/v3-prose-before-array", '[TOOL_CALLS] Let me call: [{"name": "get_time", "arguments": {}}]',
         parser=P, calls=[call("get_time")]),
    case("mistral/v3-not-json", "Sure.[TOOL_CALLS] not json at all", parser=P, content="Sure. not json at all"),
    case("mistral/v3-broken-array", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "A"}]', parser=P,
         content='[{"name": "get_weather", "arguments": {"city": "A"}]'),
    case("mistral/v3-trailing-data",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments":{"city": "Dallas"}}]\nextra trailing data', parser=P,
         content="extra trailing data", calls=[call("get_weather", {"city": "Dallas"})]),
    case("mistral/garbage-then-call", "[TOOL_CALLS] ??? [TOOL_CALLS]get_time[ARGS]{}", parser=P, content="???",
         calls=[call("get_time")]),
    case("mistral/v3-junk-then-truncated", '[TOOL_CALLS] junk [{"name": "get_weather", "arguments": {"city": "Pa',
         parser=P, truncated=True, content='[TOOL_CALLS] junk [{"name": "get_weather", "arguments": {"city": "Pa'),
    case("mistral/v11-bad-args", "[TOOL_CALLS]get_weather[ARGS]{city: Paris}", parser=P,
         content="get_weather[ARGS]{city: Paris}"),
]
