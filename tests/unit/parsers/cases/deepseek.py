"""DeepSeek cases: V3/R1 fenced JSON, V3.1, V3.2/V4 DSML, with R1/V3 reasoning."""

from parser_case_common import call, case

B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CB, CE, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
EOS = "<｜end▁of▁sentence｜>"


def v3(name, args):
    return f"{CB}function{SEP}{name}\n```json\n{args}\n```{CE}"


def v31(name, args):
    return f"{CB}{name}{SEP}{args}{CE}"


def dsml(wrapper, *invokes):
    body = "".join(
        f'<｜DSML｜invoke name="{name}">\n'
        + "".join(f'<｜DSML｜parameter name="{k}" string="{s}">{v}</｜DSML｜parameter>\n' for k, s, v in params)
        + "</｜DSML｜invoke>\n"
        for name, params in invokes
    )
    return f"<｜DSML｜{wrapper}>\n{body}</｜DSML｜{wrapper}>"


CASES = [
    case("deepseek_v3/single", B + v3("get_weather", '{"city": "Paris"}') + E + EOS, parser="deepseek_v3",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("deepseek_v3/parallel-text", "Checking both.\n" + B + v3("get_weather", '{"city": "A"}') + "\n"
         + v3("get_time", "{}") + E, parser="deepseek_v3", content="Checking both.",
         calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("deepseek_v3/typed-non-ascii", B + v3("search", '{"query": "東京", "limit": 2, "filters": {"x": null}}') + E,
         parser="deepseek_v3", calls=[call("search", {"query": "東京", "limit": 2, "filters": {"x": None}})]),
    case("deepseek_v3/v31-body-tolerated", B + v31("get_weather", '{"city": "Rome"}') + E, parser="deepseek_v3",
         calls=[call("get_weather", {"city": "Rome"})]),
    case("deepseek_v3/r1-reasoning", "The user wants weather.\n</think>\n\n" + B + v3("get_weather", '{"city": "X"}') + E,
         parser="deepseek_v3", reasoning_parser="deepseek_r1", reasoning="The user wants weather.",
         calls=[call("get_weather", {"city": "X"})]),
    case("deepseek_v3/r1-0528-own-think", "<think>\nHmm.\n</think>\nIt is 4.", parser="deepseek_v3",
         reasoning_parser="deepseek_r1", reasoning="Hmm.", content="It is 4."),
    case("deepseek_v3/r1-truncated-thinking", "Still thinking about", parser="deepseek_v3",
         reasoning_parser="deepseek_r1", reasoning="Still thinking about"),
    case("deepseek_v3/call-in-reasoning-ignored", "I could emit " + B + " here.</think>Done.", parser="deepseek_v3",
         reasoning_parser="deepseek_r1", reasoning="I could emit " + B + " here.", content="Done."),
    case("deepseek_v3/truncated", B + CB + "function" + SEP + 'get_weather\n```json\n{"city": "Pa', parser="deepseek_v3",
         truncated=True, content=CB + "function" + SEP + 'get_weather\n```json\n{"city": "Pa'),
    case("deepseek_v3/malformed-args", B + v3("get_weather", "{city: Paris}") + E, parser="deepseek_v3",
         content=v3("get_weather", "{city: Paris}")),
    case("deepseek_v31/single", B + v31("get_weather", '{"city": "Paris"}') + E + EOS, parser="deepseek_v31",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("deepseek_v31/empty-args", B + v31("get_time", "{}") + f"{CB}get_time{SEP}{CE}" + E, parser="deepseek_v31",
         calls=[call("get_time"), call("get_time")]),
    case("deepseek_v31/implicit-reasoning-end", "I need the weather." + B + v31("get_weather", '{"city": "Oslo"}') + E,
         parser="deepseek_v31", reasoning_parser="deepseek_v3", forced=True, reasoning="I need the weather.",
         calls=[call("get_weather", {"city": "Oslo"})]),
    case("deepseek_v3/raw-json-body", B + f'{CB}function{SEP}get_weather\n{{"city": "Rome"}}{CE}' + E,
         parser="deepseek_v3", calls=[call("get_weather", {"city": "Rome"})]),
    case("deepseek_v3/fence-without-lang", "Ok." + B + f'{CB}function{SEP}get_time\n```\n{{}}\n```{CE}' + E + EOS,
         parser="deepseek_v3", content="Ok.", calls=[call("get_time")]),
    case("deepseek_v31/fenced-body", B + f'{CB}get_weather{SEP}\n```json\n{{"city": "Oslo"}}\n```{CE}' + E,
         parser="deepseek_v31", calls=[call("get_weather", {"city": "Oslo"})]),
    case("deepseek_v31/forced-open-then-answer", "The user says hi.</think>Hello! How can I help?" + EOS,
         parser="deepseek_v31", reasoning_parser="deepseek_v3", forced=True, reasoning="The user says hi.",
         content="Hello! How can I help?"),
    case("deepseek_v31/forced-open-then-fenced-call",
         "Weather needed.\n</think>\n\nLet me check." + B + f'{CB}get_weather{SEP}```json\n{{"city": "Rome"}}\n```{CE}'
         + v31("get_time", "{}") + E + EOS, parser="deepseek_v31", reasoning_parser="deepseek_v3", forced=True,
         reasoning="Weather needed.", content="Let me check.",
         calls=[call("get_weather", {"city": "Rome"}), call("get_time")]),
    case("deepseek_v31/forced-open-call-in-reasoning-ends-it",
         "Must call.\n" + B + f'{CB}get_weather{SEP}\n```json\n{{"city": "Rome"}}\n```{CE}' + E, parser="deepseek_v31",
         reasoning_parser="deepseek_v3", forced=True, reasoning="Must call.", calls=[call("get_weather", {"city": "Rome"})]),
    case("deepseek_v31/thinking-off", "Hello there.", parser="deepseek_v31", reasoning_parser="deepseek_v3",
         content="Hello there."),
    case("deepseek_v31/escapes", B + v31("write_file", '{"path": "a\\\\b.txt", "content": "x\\ny\\t\\"z\\""}') + E,
         parser="deepseek_v31", calls=[call("write_file", {"path": "a\\b.txt", "content": 'x\ny\t"z"'})]),
    case("deepseek_v32/single",
         dsml("function_calls", ("get_weather", [("city", "true", "SF"), ("days", "false", "3")])),
         parser="deepseek_v32", calls=[call("get_weather", {"city": "SF", "days": 3})]),
    case("deepseek_v32/parallel-text",
         "Let me check.\n\n" + dsml("function_calls", ("get_weather", [("city", "true", "A")]), ("get_time", [])),
         parser="deepseek_v32", content="Let me check.", calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("deepseek_v32/json-values",
         dsml("function_calls", ("search", [("filters", "false", '{"a": [1, 2]}'), ("exact", "false", "true"),
                                            ("query", "true", " spaced  text ")])),
         parser="deepseek_v32",
         calls=[call("search", {"filters": {"a": [1, 2]}, "exact": True, "query": " spaced  text "})]),
    case("deepseek_v32/string-flag-beats-schema",
         dsml("function_calls", ("get_weather", [("city", "true", "Rome"), ("days", "true", "5")])),
         parser="deepseek_v32", calls=[call("get_weather", {"city": "Rome", "days": "5"})]),
    case("deepseek_v32/string-flag-object-stays-text",
         dsml("function_calls", ("search", [("filters", "true", '{"a": 1}'), ("exact", "true", "true")])),
         parser="deepseek_v32", calls=[call("search", {"filters": '{"a": 1}', "exact": "true"})]),
    case("deepseek_v32/unwrap-input-text",
         dsml("function_calls", ("get_weather", [("input", "true", '{"city": "Lima", "days": 2}')])),
         parser="deepseek_v32", calls=[call("get_weather", {"city": "Lima", "days": 2})]),
    case("deepseek_v32/wrapper-undeclared-keys-kept",
         dsml("function_calls", ("get_weather", [("arguments", "true", '{"town": "Lima"}')])), parser="deepseek_v32",
         calls=[call("get_weather", {"arguments": '{"town": "Lima"}'})]),
    case("deepseek_v32/wrapper-without-schema-kept",
         dsml("function_calls", ("get_weather", [("input", "true", '{"city": "Lima"}')])), parser="deepseek_v32",
         tools=None, calls=[call("get_weather", {"input": '{"city": "Lima"}'})]),
    case("deepseek_v32/unwrap-arguments",
         dsml("function_calls", ("get_weather", [("arguments", "false", '{"city": "Lima"}')])), parser="deepseek_v32",
         calls=[call("get_weather", {"city": "Lima"})]),
    case("deepseek_v32/with-thinking", "Think first.</think>" + dsml("function_calls", ("get_time", [])),
         parser="deepseek_v32", reasoning_parser="deepseek_v3", forced=True, reasoning="Think first.",
         calls=[call("get_time")]),
    case("deepseek_v32/truncated",
         '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">S',
         parser="deepseek_v32", truncated=True,
         content='<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">S'),
    case("deepseek_v4/single", dsml("tool_calls", ("get_weather", [("city", "true", "SF")])), parser="deepseek_v4",
         calls=[call("get_weather", {"city": "SF"})]),
    case("deepseek_v4/rejects-v32-wrapper", "Text " + dsml("function_calls", ("get_time", [])), parser="deepseek_v4",
         content="Text " + dsml("function_calls", ("get_time", []))),
    # SGLang test_function_call_parser (TestDeepSeekV32Detector, json format): an invoke holding JSON.
    case("deepseek_v32/json-body",
         "I'll look both up.\n\n        <｜DSML｜function_calls>\n            <｜DSML｜invoke name=\"get_weather\">\n"
         '            {\n                "city": "San Francisco"\n            }\n        </｜DSML｜invoke>\n'
         '            <｜DSML｜invoke name="search">\n            {\n                "query": "WebNav benchmark",\n'
         '                "limit": 10,\n                "tags": ["web"]\n            }\n        </｜DSML｜invoke>\n'
         "        </｜DSML｜function_calls>\n        ", parser="deepseek_v32", content="I'll look both up.",
         calls=[call("get_weather", {"city": "San Francisco"}),
                call("search", {"query": "WebNav benchmark", "limit": 10, "tags": ["web"]})]),
    case("deepseek_v32/json-body-then-params-ignored",
         '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">{"city": "Oslo"}\n'
         '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
         parser="deepseek_v32", calls=[call("get_weather", {"city": "Oslo"})]),
    case("deepseek_v4/json-body", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n{}\n</｜DSML｜invoke>\n'
         "</｜DSML｜tool_calls>", parser="deepseek_v4", calls=[call("get_time")]),
    case("deepseek_v32/json-body-truncated", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n{"city": "Os',
         parser="deepseek_v32", truncated=True,
         content='<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n{"city": "Os'),
]
