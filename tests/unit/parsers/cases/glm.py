"""GLM-4.5/4.6/4.7, LongCat and Hunyuan v3 key/value cases."""

from parser_case_common import call, case


def _tool(name, **props):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props}}}


MULTIPLY = [_tool("multiply", a={"type": "number"}, b={"type": "number"})]
TEMPERATURE = [_tool("get_current_temperature", location={"type": "str"})]
TODO_WRITE = [_tool("todo_write", todos={"type": "array"})]
ESC_TODOS = r'[{\"id\": \"1\", \"task\": \"Check the backend\", \"status\": \"in_progress\"}, ' \
    r'{\"id\": \"2\", \"task\": \"Write the report\", \"status\": \"pending\"}]'


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
    # mlx-lm tests/test_tool_parsing.py (glm47): lenient bodies after the tag.
    case("glm47/plain-key-value", "<tool_call>multiply a=12234585 b=48838483920</tool_call>", parser="glm47",
         tools=MULTIPLY, calls=[call("multiply", {"a": 12234585, "b": 48838483920})]),
    case("glm47/plain-key-value-quoted", '<tool_call>get_weather city="New York" days=3</tool_call>', parser="glm47",
         calls=[call("get_weather", {"city": "New York", "days": 3})]),
    case("glm47/name-newline-json", '<tool_call>get_weather\n{"city": "Rome", "days": 2}</tool_call>', parser="glm47",
         calls=[call("get_weather", {"city": "Rome", "days": 2})]),
    case("glm47/name-space-json", '<tool_call>get_weather {"city": "Rome"}</tool_call>', parser="glm47",
         calls=[call("get_weather", {"city": "Rome"})]),
    case("glm47/plain-words-are-prose", "<tool_call>tags are used here</tool_call>", parser="glm47",
         content="<tool_call>tags are used here</tool_call>"),
    case("glm47/plain-unoffered-name-is-prose", "<tool_call>shutdown now=1</tool_call>", parser="glm47",
         content="<tool_call>shutdown now=1</tool_call>"),
    # A value the model quoted as a JSON string is that string: SGLang's GLM detectors always; mlx-lm's
    # glm47 and vLLM's glm4 only when the type is not spelled "string" (they keep the quotes then; we follow SGLang).
    case("glm47/quoted-string-value", '<tool_call>get_current_temperature<arg_key>location</arg_key>'
         '<arg_value>"London"</arg_value></tool_call>', parser="glm47", tools=TEMPERATURE,
         calls=[call("get_current_temperature", {"location": "London"})]),
    case("glm47/quoted-string-value-typed-string", g47("get_weather", city='"Oslo"'), parser="glm47",
         calls=[call("get_weather", {"city": "Oslo"})]),
    # SGLang test_glm47_moe_detector (test_array_argument_with_escaped_json): a JSON array escaped once.
    case("glm47/escaped-json-array", g47("todo_write", todos=ESC_TODOS), parser="glm47", tools=TODO_WRITE,
         calls=[call("todo_write", {"todos": [{"id": "1", "task": "Check the backend", "status": "in_progress"},
                                              {"id": "2", "task": "Write the report", "status": "pending"}]})]),
    case("glm47/escaped-json-windows-path",
         g47("todo_write", todos=r'[{\"id\": \"1\", \"task\": \"Check file at C:\\\\Users\\\\test.txt\"}]'),
         parser="glm47", tools=TODO_WRITE,
         calls=[call("todo_write", {"todos": [{"id": "1", "task": "Check file at C:\\Users\\test.txt"}]})]),
    case("glm45/escaped-json-literal-backslash-n",
         g45("todo_write", todos=r'[{\"id\": \"1\", \"task\": \"Print \\\\n to see newline\"}]'),
         parser="glm45", tools=TODO_WRITE,
         calls=[call("todo_write", {"todos": [{"id": "1", "task": "Print \\n to see newline"}]})]),
    case("glm47/escaped-json-untyped-object", g47("get_weather", city="X", extra=r'{\"k\": [1, 2]}'),
         parser="glm47", calls=[call("get_weather", {"city": "X", "extra": {"k": [1, 2]}})]),
    case("glm47/escaped-text-in-string-stays", g47("write_file", path="a", content=r'[{\"id\": 1}]'),
         parser="glm47", calls=[call("write_file", {"path": "a", "content": r'[{\"id\": 1}]'})]),
    # GLM-4.6 writing the template's newlines once-escaped, as the two characters \n (SGLang
    # test_function_call_parser TestGlm4MoeDetector.test_array_argument_with_escaped_json).
    case("glm45/escaped-layout-newlines",
         r'<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>',
         parser="glm45", calls=[call("get_weather", {"city": "Paris"})]),
    case("glm45/escaped-layout-escaped-json",
         r'<tool_call>search\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", \"b\"]</arg_value></tool_call>',
         parser="glm45", calls=[call("search", {"tags": ["a", "b"]})]),
    case("glm45/backslash-n-in-value-kept",
         r'<tool_call>write_file<arg_key>path</arg_key><arg_value>a.txt</arg_value><arg_key>content</arg_key><arg_value>x\ny</arg_value></tool_call>',
         parser="glm45", calls=[call("write_file", {"path": "a.txt", "content": r"x\ny"})]),
]
