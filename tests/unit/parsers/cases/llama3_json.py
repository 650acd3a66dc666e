"""Llama 3.1/3.2/3.3 JSON cases."""

from parser_case_common import call, case

P = "llama3_json"
W = '{"name": "get_weather", "parameters": {"city": "SF"}}'

CASES = [
    case("llama3/python-tag", f"<|python_tag|>{W}<|eom_id|>", parser=P, calls=[call("get_weather", {"city": "SF"})]),
    case("llama3/bare", W, parser=P, calls=[call("get_weather", {"city": "SF"})]),
    case("llama3/arguments-key", '{"name": "get_weather", "arguments": {"city": "LA"}}<|eot_id|>', parser=P,
         calls=[call("get_weather", {"city": "LA"})]),
    case("llama3/type-key", '{"type": "function", "name": "get_time", "parameters": {}}', parser=P,
         calls=[call("get_time")]),
    case("llama3/semicolon-parallel", W + '; {"name": "get_time", "parameters": {}}', parser=P,
         calls=[call("get_weather", {"city": "SF"}), call("get_time")]),
    case("llama3/newline-parallel", W + '\n{"name": "get_weather", "parameters": {"city": "NYC", "days": 2}}', parser=P,
         calls=[call("get_weather", {"city": "SF"}), call("get_weather", {"city": "NYC", "days": 2})]),
    case("llama3/typed-nested",
         '{"name": "search", "parameters": {"query": "a\\"b", "limit": null, "filters": {"x": [1, 2.5, true]}}}',
         parser=P, calls=[call("search", {"query": 'a"b', "limit": None, "filters": {"x": [1, 2.5, True]}})]),
    case("llama3/non-ascii", '{"name": "get_weather", "parameters": {"city": "Zürich \\u5317\\u4eac"}}', parser=P,
         calls=[call("get_weather", {"city": "Zürich 北京"})]),
    case("llama3/empty-params", '<|python_tag|>{"name": "get_time", "parameters": {}}', parser=P,
         calls=[call("get_time")]),
    case("llama3/text-after-call", W + "\nLet me know if you need more.", parser=P,
         content="Let me know if you need more.", calls=[call("get_weather", {"city": "SF"})]),
    case("llama3/json-in-prose", "This is not a tool call: " + W, parser=P, content="This is not a tool call: " + W),
    case("llama3/json-answer", '{"name": "Bob", "age": 3}', parser=P, content='{"name": "Bob", "age": 3}'),
    case("llama3/fenced-not-a-call", f"```json\n{W}\n```", parser=P, content=f"```json\n{W}\n```"),
    case("llama3/builtin-call", '<|python_tag|>brave_search.call(query="weather in SF (CA)")<|eom_id|>', parser=P,
         calls=[call("brave_search", {"query": "weather in SF (CA)"}, offered=False)]),
    case("llama3/function-tag", 'Calling: <function=get_weather>{"city": "SF"}</function>', parser=P,
         content="Calling:", calls=[call("get_weather", {"city": "SF"})]),
    case("llama3/truncated", '{"name": "get_weather", "parameters": {"city": "S', parser=P, truncated=True,
         content='{"name": "get_weather", "parameters": {"city": "S'),
    case("llama3/unknown-tool", '{"name": "launch", "parameters": {"code": 1}}', parser=P,
         calls=[call("launch", {"code": 1}, offered=False)]),
    case("llama3/plain", "The weather is nice.<|eot_id|>", parser=P, content="The weather is nice."),
    case("llama3/python-tag-code", "<|python_tag|>import math\nprint(math.pi)<|eom_id|>", parser=P,
         content="import math\nprint(math.pi)"),
]
