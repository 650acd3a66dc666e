"""MiniMax-M2 / MiniMax-M1 / Step-3 cases."""

from parser_case_common import call, case

STEP_B, STEP_E = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"


def m2(*invokes):
    return "<minimax:tool_call>\n" + "".join(
        f'<invoke name="{n}">\n' + "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in ps) + "</invoke>\n"
        for n, ps in invokes) + "</minimax:tool_call>"


def step3(name, **params):
    return ("<｜tool_call_begin｜>function<｜tool_sep｜>" + f'<steptml:invoke name="{name}">'
            + "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in params.items())
            + "</steptml:invoke><｜tool_call_end｜>")


CASES = [
    case("minimax_m2/single-after-think", "Need weather.\n</think>\n\n" + m2(("get_weather", [("city", "Paris")])) + "[e~[",
         parser="minimax_m2", reasoning_parser="minimax_m2", reasoning="Need weather.",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("minimax_m2/typed-nullable", m2(("search", [("query", " keep  spaces "), ("limit", "null"), ("ratio", "1.5"),
                                                     ("tags", '["a", "b"]'), ("exact", "True")])), parser="minimax_m2",
         calls=[call("search", {"query": " keep  spaces ", "limit": None, "ratio": 1.5, "tags": ["a", "b"], "exact": True})]),
    case("minimax_m2/parallel-invokes", m2(("get_weather", [("city", "A")]), ("get_time", [])), parser="minimax_m2",
         calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("minimax_m2/multiline-value", m2(("write_file", [("path", "a.py"), ("content", "\nx = 1\n\ny = 2\n")])),
         parser="minimax_m2", calls=[call("write_file", {"path": "a.py", "content": "\nx = 1\n\ny = 2\n"})]),
    case("minimax_m2/append-think", "Plan it.</think>\nHello!", parser="minimax_m2",
         reasoning_parser="minimax_m2_append_think", content="<think>Plan it.</think>\nHello!"),
    case("minimax_m2/truncated", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Par',
         parser="minimax_m2", truncated=True,
         content='<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Par'),
    case("minimax_m2/unknown-tool", m2(("nuke", [("target", "all")])), parser="minimax_m2",
         calls=[call("nuke", {"target": "all"}, offered=False)]),
    case("minimax_m1/json-lines", '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "A"}}\n'
         '{"name": "get_time", "arguments": {}}\n</tool_calls>', parser="minimax",
         calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("minimax_m1/call-in-think-ignored",
         '<think>maybe <tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls></think>No call needed.',
         parser="minimax", reasoning_parser="qwen3",
         reasoning='maybe <tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls>', content="No call needed."),
    case("step3/single", "Sure." + STEP_B + step3("get_weather", city="Paris", days="3") + STEP_E, parser="step3",
         content="Sure.", calls=[call("get_weather", {"city": "Paris", "days": 3})]),
    case("step3/parallel-whitespace", STEP_B + step3("write_file", path="a", content="  x\n  y  ") + step3("get_time")
         + STEP_E, parser="step3", calls=[call("write_file", {"path": "a", "content": "  x\n  y  "}), call("get_time")]),
    # vLLM's step3 tests: the function name may follow the separator before the invoke.
    case("step3/name-after-sep", STEP_B + "<｜tool_call_begin｜>function<｜tool_sep｜>write_file\n"
         '<steptml:invoke name="write_file"><steptml:parameter name="path">\tsrc/a.py </steptml:parameter>'
         '<steptml:parameter name="content">  def f():\n      pass\n</steptml:parameter></steptml:invoke>'
         "<｜tool_call_end｜>" + STEP_B.replace("begin", "end"), parser="step3",
         calls=[call("write_file", {"path": "\tsrc/a.py ", "content": "  def f():\n      pass\n"})]),
    case("step3/name-after-sep-typed", STEP_B + "<｜tool_call_begin｜>function<｜tool_sep｜> get_weather "
         '<steptml:invoke name="get_weather"><steptml:parameter name="city">Oslo</steptml:parameter>'
         '<steptml:parameter name="days"> 2 </steptml:parameter></steptml:invoke><｜tool_call_end｜>'
         + step3("get_time") + STEP_E, parser="step3",
         calls=[call("get_weather", {"city": "Oslo", "days": 2}), call("get_time")]),
    case("step3/reasoning", "Let me see.</think>" + STEP_B + step3("get_time") + STEP_E, parser="step3",
         reasoning_parser="step3", reasoning="Let me see.", calls=[call("get_time")]),
    case("minimax_m2/text-escapes-non-ascii", "Here: " + m2(("write_file", [("path", "dir/北京.txt"),
                                                                       ("content", 'say "hi" \\n {json} <b>')])),
         parser="minimax_m2", content="Here:",
         calls=[call("write_file", {"path": "dir/北京.txt", "content": 'say "hi" \\n {json} <b>'})]),
    case("minimax_m2/malformed", "<minimax:tool_call>\nno invoke here\n</minimax:tool_call>", parser="minimax_m2",
         content="<minimax:tool_call>\nno invoke here\n</minimax:tool_call>"),
    case("minimax_m1/truncated", '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "A', parser="minimax",
         truncated=True, content='<tool_calls>\n{"name": "get_weather", "arguments": {"city": "A'),
    case("minimax_m1/malformed", "<tool_calls>\n{not json}\n</tool_calls>", parser="minimax",
         content="<tool_calls>\n{not json}\n</tool_calls>"),
    case("minimax_m1/bad-line-skipped", 'Checking.\n<tool_calls>\n{"name": "get_weather", "arguments": {"city": "A"}}\n'
         '{not json}\n{"name": "get_time", "arguments": {}} trailing\n{"name": "get_time", "arguments": {}}\n</tool_calls>',
         parser="minimax", content="Checking.", calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("minimax_m1/missing-fields-dropped", '<tool_calls>\n{"arguments": {"city": "A"}}\n{"name": "get_time"}\n'
         '{"name": "", "arguments": {}}\n{"name": "get_weather", "arguments": {"city": "B"}}\n</tool_calls>',
         parser="minimax", calls=[call("get_weather", {"city": "B"})]),
    case("minimax_m1/arguments-as-json-text",
         '<tool_calls>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"C\\"}"}</tool_calls>', parser="minimax",
         calls=[call("get_weather", {"city": "C"})]),
    case("minimax_m1/no-call-line-is-content", '<tool_calls>\n{"name": "get_time"}\n</tool_calls>', parser="minimax",
         content='<tool_calls>\n{"name": "get_time"}\n</tool_calls>'),
    case("minimax_m1/call-in-think-stays-text",
         '<think>maybe <tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls></think>No call needed.',
         parser="minimax",
         content='<think>maybe <tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls></think>No call needed.'),
    case("minimax_m1/think-then-call", '<think>plan: <tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls>'
         '</think>\n<tool_calls>\n{"name": "get_weather", "arguments": {"city": "D"}}\n</tool_calls>', parser="minimax",
         reasoning_parser="qwen3", reasoning='plan: <tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls>',
         calls=[call("get_weather", {"city": "D"})]),
    case("minimax_m1/unclosed-think-call-parsed", '<think>hmm <tool_calls>\n{"name": "get_time", "arguments": {}}\n'
         '</tool_calls>', parser="minimax", content="<think>hmm", calls=[call("get_time")]),
    case("minimax_m1/truncated-after-call", '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "E"}}\n'
         '{"name": "get_time", "argu', parser="minimax", truncated=True, content='{"name": "get_time", "argu',
         calls=[call("get_weather", {"city": "E"})]),
    case("step3/truncated", STEP_B + '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">'
         '<steptml:parameter name="city">Pa', parser="step3", truncated=True,
         content='<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather"><steptml:parameter name="city">Pa'),
    case("step3/non-ascii-unknown", STEP_B + step3("translate", text="こんにちは") + STEP_E, parser="step3",
         calls=[call("translate", {"text": "こんにちは"}, offered=False)]),
]
