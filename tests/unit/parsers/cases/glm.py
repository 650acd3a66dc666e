"""GLM-4.5/4.6/4.7, LongCat and Hunyuan v3 key/value cases."""

from parser_case_common import call, case


def g45(name, **kv):
    return f"<tool_call>{name}\n" + "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in kv.items()) + "</tool_call>"


def g47(name, **kv):
    return f"<tool_call>{name}" + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in kv.items()) + "</tool_call>"


CASES = [
    case("glm45/single", g45("get_weather", city="Paris"), parser="glm45", calls=[call("get_weather", {"city": "Paris"})]),
    case("glm45/typed", g45("search", query="42", limit="7", exact="false", filters='{"a": 1}', tags='["x"]'),
         parser="glm45",
         calls=[call("search", {"query": "42", "limit": 7, "exact": False, "filters": {"a": 1}, "tags": ["x"]})]),
    case("glm45/untyped-json-fallback", g45("get_weather", city="X", extra="[1, 2]", note="hello"), parser="glm45",
         calls=[call("get_weather", {"city": "X", "extra": [1, 2], "note": "hello"})]),
    case("glm45/parallel-reasoning", "<think>Two lookups.</think>\nOn it.\n" + g45("get_weather", city="A") + "\n"
         + g45("get_time") + "<|observation|>", parser="glm45", reasoning_parser="glm45", reasoning="Two lookups.",
         content="On it.", calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    # SGLang's glm45 detector: a call opened before ``</think>`` ends the reasoning.
    case("glm45/call-ends-open-think", "<think>Look up Oslo first" + g45("get_weather", city="Oslo"),
         parser="glm45", reasoning_parser="glm45", reasoning="Look up Oslo first",
         calls=[call("get_weather", {"city": "Oslo"})]),
    case("glm45/call-ends-forced-think", "weighing it up\n" + g45("get_time"), parser="glm45",
         reasoning_parser="glm45", forced=True, reasoning="weighing it up", calls=[call("get_time")]),
    case("glm45/call-ends-think-no-tool-parser", "<think>hmm<tool_call>half a call", parser=None,
         reasoning_parser="glm45", reasoning="hmm", content="<tool_call>half a call"),
    case("glm45/zero-arg", "<tool_call>get_time</tool_call>", parser="glm45", calls=[call("get_time")]),
    case("glm45/whitespace-kept", g45("write_file", path="a.txt", content="  two  spaces \n"), parser="glm45",
         calls=[call("write_file", {"path": "a.txt", "content": "  two  spaces \n"})]),
    case("glm45/end-tag-in-value", g45("write_file", path="t", content="a</tool_call>b"), parser="glm45",
         calls=[call("write_file", {"path": "t", "content": "a</tool_call>b"})]),
    case("glm45/non-ascii", g45("get_weather", city="Zürich 北京 😀"), parser="glm45",
         calls=[call("get_weather", {"city": "Zürich 北京 😀"})]),
    case("glm45/marker-in-prose", "GLM wraps calls in <tool_call> and </tool_call> tags.", parser="glm45",
         content="GLM wraps calls in <tool_call> and </tool_call> tags."),
    case("glm45/truncated", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par", parser="glm45",
         truncated=True, content="<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"),
    case("glm45/truncated-complete-pairs", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value>",
         parser="glm45", truncated=True, content="<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value>"),
    case("glm47/single", g47("get_weather", city="Rome", days="2"), parser="glm47",
         calls=[call("get_weather", {"city": "Rome", "days": 2})]),
    case("glm47/json-body", '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
         parser="glm47", calls=[call("get_weather", {"city": "Rome"})]),
    case("glm47/unknown-tool", g47("shutdown", now="true"), parser="glm47",
         calls=[call("shutdown", {"now": True}, offered=False)]),
    case("longcat/kv", "<longcat_tool_call>get_weather<longcat_arg_key>city</longcat_arg_key>"
         "<longcat_arg_value>Paris</longcat_arg_value></longcat_tool_call>", parser="longcat",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("longcat/json", '<longcat_tool_call>{"name": "get_time", "arguments": {}}</longcat_tool_call>',
         parser="longcat", calls=[call("get_time")]),
    case("hy_v3/section", "<tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>Oslo</arg_value>"
         "<arg_key>days</arg_key><arg_value>4</arg_value></tool_call><tool_call>get_time<tool_sep></tool_call></tool_calls>",
         parser="hy_v3", calls=[call("get_weather", {"city": "Oslo", "days": 4}), call("get_time")]),
    case("glm45/malformed-pairs", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>A</arg_value>\n"
         "<arg_key>broken</tool_call>Next.", parser="glm45",
         content="<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>A</arg_value>\n<arg_key>broken</tool_call>Next."),
    case("longcat/truncated", '<longcat_tool_call>{"name": "get_time", "argu', parser="longcat", truncated=True,
         content='<longcat_tool_call>{"name": "get_time", "argu'),
    case("longcat/parallel-text", "Two.<longcat_tool_call>get_time</longcat_tool_call><longcat_tool_call>get_weather"
         "<longcat_arg_key>city</longcat_arg_key><longcat_arg_value>Z</longcat_arg_value></longcat_tool_call>",
         parser="longcat", content="Two.", calls=[call("get_time"), call("get_weather", {"city": "Z"})]),
    case("hy_v3/truncated", "<tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>Os",
         parser="hy_v3", truncated=True, content="<tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>Os"),
]
