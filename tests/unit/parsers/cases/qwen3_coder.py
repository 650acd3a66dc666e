"""Qwen3-Coder / Qwen3.5 XML cases (plus qwen3_xml, Step-3.5 and Seed-OSS, same grammar)."""

from parser_case_common import call, case

P = "qwen3_coder"


def fn(name, **params):
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


CASES = [
    case("qwen3_coder/single", fn("get_weather", city="Paris", days="3"), parser=P,
         calls=[call("get_weather", {"city": "Paris", "days": 3})]),
    case("qwen3_coder/text-around", "I'll look it up.\n\n" + fn("get_weather", city="Paris") + "\nBack soon.", parser=P,
         content="I'll look it up.\n\n\nBack soon.", calls=[call("get_weather", {"city": "Paris"})]),
    case("qwen3_coder/parallel", fn("get_weather", city="A") + "\n" + fn("get_time") + "\n" + fn("get_weather", city="B"),
         parser=P, calls=[call("get_weather", {"city": "A"}), call("get_time"), call("get_weather", {"city": "B"})]),
    case("qwen3_coder/multiline-indent",
         fn("write_file", path="src/a.py", content="def f():\n    return 1\n"), parser=P,
         calls=[call("write_file", {"path": "src/a.py", "content": "def f():\n    return 1\n"})]),
    case("qwen3_coder/whitespace-exact",
         "<tool_call>\n<function=write_file>\n<parameter=path>a b</parameter>\n<parameter=content>\n\n  x  \n\t\n\n"
         "</parameter>\n</function>\n</tool_call>", parser=P,
         calls=[call("write_file", {"path": "a b", "content": "\n  x  \n\t\n"})]),
    case("qwen3_coder/typed-by-schema",
         fn("search", query="42", limit="null", exact="true", ratio="0.25", filters='{"lang": "en", "n": [1, 2]}',
            tags="['a', 'b']"), parser=P,
         calls=[call("search", {"query": "42", "limit": None, "exact": True, "ratio": 0.25,
                                "filters": {"lang": "en", "n": [1, 2]}, "tags": ["a", "b"]})]),
    case("qwen3_coder/typed-int-fallback-raw", fn("get_weather", city="X", days="three"), parser=P,
         calls=[call("get_weather", {"city": "X", "days": "three"})]),
    case("qwen3_coder/python-dict-value", fn("search", filters="{'a': True, 'b': None}"), parser=P,
         calls=[call("search", {"filters": {"a": True, "b": None}})]),
    case("qwen3_coder/unknown-param-raw", fn("get_weather", city="X", extra="5"), parser=P,
         calls=[call("get_weather", {"city": "X", "extra": "5"})]),
    case("qwen3_coder/close-tag-in-value",
         "<tool_call>\n<function=write_file>\n<parameter=path>\nt.xml\n</parameter>\n<parameter=content>\n"
         "a</parameter>b\n</parameter>\n</function>\n</tool_call>", parser=P,
         calls=[call("write_file", {"path": "t.xml", "content": "a</parameter>b"})]),
    case("qwen3_coder/missing-param-close",
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</function>\n</tool_call>", parser=P,
         calls=[call("get_weather", {"city": "Rome"})]),
    case("qwen3_coder/no-wrapper", "<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>",
         parser=P, calls=[call("get_weather", {"city": "Rome"})]),
    case("qwen3_coder/empty-args", "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", parser=P,
         calls=[call("get_time")]),
    case("qwen3_coder/non-ascii-escapes",
         fn("write_file", path="C:\\temp\\北京.txt", content='print("héllo") # \\n stays \U0001F600'), parser=P,
         calls=[call("write_file", {"path": "C:\\temp\\北京.txt", "content": 'print("héllo") # \\n stays \U0001F600'})]),
    case("qwen3_coder/duplicate-param",
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n"
         "</function>\n</tool_call>", parser=P, calls=[call("get_weather", {"city": "A"})]),
    case("qwen3_coder/unknown-tool", fn("format_disk", drive="C"), parser=P,
         calls=[call("format_disk", {"drive": "C"}, offered=False)]),
    case("qwen3_coder/json-body", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
         parser=P, calls=[call("get_weather", {"city": "Oslo"})]),
    case("qwen3_coder/truncated-value",
         "Writing.\n<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n<parameter=content>\nimport o",
         parser=P, truncated=True,
         content="Writing.\n<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n<parameter=content>\nimport o"),
    case("qwen3_coder/truncated-before-function-close",
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n", parser=P, truncated=True,
         content="<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>"),
    case("qwen3_coder/truncated-in-tag", "<tool_call>\n<function=get_wea", parser=P, truncated=True,
         content="<tool_call>\n<function=get_wea"),
    case("qwen3_coder/marker-in-prose", "Models emit <tool_call> and <function=...> tags.", parser=P,
         content="Models emit <tool_call> and <function=...> tags."),
    case("qwen3_coder/malformed-body", "<tool_call>\nnot a call\n</tool_call>", parser=P,
         content="<tool_call>\nnot a call\n</tool_call>"),
    case("qwen3_coder/qwen35-forced-open-implicit-end",
         "The user wants Paris weather.\n" + fn("get_weather", city="Paris"), parser=P, reasoning_parser="qwen3",
         forced=True, reasoning="The user wants Paris weather.", calls=[call("get_weather", {"city": "Paris"})]),
    case("qwen3_coder/qwen35-closed-think",
         "Plan: call it.\n</think>\n\n" + fn("get_weather", city="Paris"), parser=P, reasoning_parser="qwen3",
         forced=True, reasoning="Plan: call it.", calls=[call("get_weather", {"city": "Paris"})]),
    case("qwen3_coder/tag-in-reasoning-stays",
         "<think>I might write <tool_call> here, but no.</think>Answer: 4.", parser=P, reasoning_parser="qwen3",
         reasoning="I might write <tool_call> here, but no.", content="Answer: 4."),
    case("qwen3_xml/single", fn("get_weather", city="Lyon"), parser="qwen3_xml",
         calls=[call("get_weather", {"city": "Lyon"})]),
    case("step3p5/single", fn("get_weather", city="Lyon"), parser="step3p5", reasoning_parser="step3p5",
         calls=[call("get_weather", {"city": "Lyon"})]),
    case("seed_oss/think-quotes-call",
         "<seed:think>Format: <seed:tool_call><function=x></function></seed:tool_call>. "
         "<seed:cot_budget_reflect>100 left</seed:cot_budget_reflect></seed:think>"
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nKyiv\n</parameter>\n</function>\n</seed:tool_call>"
         "<seed:eos>", parser="seed_oss", reasoning_parser="seed_oss",
         reasoning="Format: <seed:tool_call><function=x></function></seed:tool_call>. "
                   "<seed:cot_budget_reflect>100 left</seed:cot_budget_reflect>",
         calls=[call("get_weather", {"city": "Kyiv"})]),
    case("seed_oss/parallel-and-text",
         "Two calls.<seed:tool_call>\n<function=get_time>\n</function>\n</seed:tool_call>"
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=days>\n2\n"
         "</parameter>\n</function>\n</seed:tool_call>", parser="seed_oss",
         content="Two calls.", calls=[call("get_time"), call("get_weather", {"city": "X", "days": 2})]),
    case("qwen3_coder/param-open-ends-value",
         "Checking:\n<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas\n<parameter=unit>\nF\n</parameter>\n"
         "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>", parser=P, content="Checking:",
         calls=[call("get_weather", {"city": "Dallas", "unit": "F", "days": 2})]),
    case("qwen3_coder/param-open-ends-last-value",
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n<parameter=days>\n4\n</function>\n</tool_call>",
         parser=P, calls=[call("get_weather", {"city": "A", "days": 4})]),
    case("qwen3_coder/param-open-mid-line-is-text",
         fn("write_file", content="use <parameter=path> tags", path="a.md"), parser=P,
         calls=[call("write_file", {"content": "use <parameter=path> tags", "path": "a.md"})]),
    case("qwen3_coder/param-open-given-key-is-text",
         "<tool_call>\n<function=write_file>\n<parameter=path>\nq.md\n</parameter>\n<parameter=content>\nx\n"
         "<parameter=path>\ny\n</parameter>\n</function>\n</tool_call>", parser=P,
         calls=[call("write_file", {"path": "q.md", "content": "x\n<parameter=path>\ny"})]),
    case("qwen3_coder/param-open-undeclared-key-is-text",
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n<parameter=zip>\ny\n</parameter>\n</function>\n"
         "</tool_call>", parser=P, calls=[call("get_weather", {"city": "x\n<parameter=zip>\ny"})]),
    case("qwen3_coder/param-open-ends-value-unknown-tool",
         "<tool_call>\n<function=format_disk>\n<parameter=drive>\nC\n<parameter=force>\ntrue\n</parameter>\n"
         "</function>\n</tool_call>", parser=P, calls=[call("format_disk", {"drive": "C", "force": "true"}, offered=False)]),
    case("step3p5/param-open-ends-value",
         "<tool_call>\n<function=search>\n<parameter=query>\nrust\n<parameter=tags>\n[\"a\"]\n</parameter>\n"
         "</function>\n</tool_call>", parser="step3p5", calls=[call("search", {"query": "rust", "tags": ["a"]})]),
    case("seed_oss/typed-array-object",
         "<seed:tool_call>\n<function=search>\n<parameter=tags>\n[\"a\",\"b\"]\n</parameter>\n"
         "<parameter=filters>{\"lang\": \"en\", \"n\": [1]}</parameter>\n<parameter=limit>3</parameter>\n"
         "<parameter=query>[not a list]</parameter>\n</function>\n</seed:tool_call>", parser="seed_oss",
         reasoning_parser="seed_oss",
         calls=[call("search", {"tags": ["a", "b"], "filters": {"lang": "en", "n": [1]}, "limit": 3,
                                "query": "[not a list]"})]),
    case("seed_oss/python-list-and-bad-array",
         "<seed:tool_call>\n<function=search>\n<parameter=tags>['x', 'y']</parameter>\n"
         "<parameter=filters>{oops</parameter>\n</function>\n</seed:tool_call>", parser="seed_oss",
         calls=[call("search", {"tags": ["x", "y"], "filters": "{oops"})]),
    case("seed_oss/param-open-stays-text",
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Dallas\n<parameter=unit>C</parameter>\n"
         "</function>\n</seed:tool_call>", parser="seed_oss",
         calls=[call("get_weather", {"city": "Dallas\n<parameter=unit>C"})]),
    case("seed_oss/truncated", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nX", parser="seed_oss",
         truncated=True, content="<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nX"),
    # Seed-OSS without a reasoning parser (vLLM test_seed_oss_tool_parser, unlimited thinking
    # budget): the think block stays content and the call it quotes is no call.
    case("seed_oss/think-block-as-content-quotes-call",
         "<seed:think>Use <seed:tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n"
         "</function>\n</seed:tool_call> for that.</seed:think>"
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nKyiv\n</parameter>\n</function>\n</seed:tool_call>",
         parser="seed_oss",
         content="<seed:think>Use <seed:tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n"
                 "</function>\n</seed:tool_call> for that.</seed:think>",
         calls=[call("get_weather", {"city": "Kyiv"})]),
    case("seed_oss/unclosed-think-block-is-scanned", "<seed:think>cut off <seed:tool_call>\n<function=get_time>\n"
         "</function>\n</seed:tool_call>", parser="seed_oss", content="<seed:think>cut off",
         calls=[call("get_time")]),
]
