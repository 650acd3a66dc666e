"""Gemma 4 and FunctionGemma ``call:NAME{...}`` cases."""

from parser_case_common import call, case

Q = '<|"|>'

CASES = [
    case("gemma4/single", f"<|tool_call>call:get_weather{{city:{Q}Paris{Q},days:3}}<tool_call|>", parser="gemma4",
         calls=[call("get_weather", {"city": "Paris", "days": 3})]),
    case("gemma4/back-to-back", f"<|tool_call>call:get_weather{{city:{Q}A{Q}}}<tool_call|><|tool_call>call:get_time{{}}"
         "<tool_call|>", parser="gemma4", calls=[call("get_weather", {"city": "A"}), call("get_time")]),
    case("gemma4/nested", f"<|tool_call>call:search{{query:{Q}a, b}}{Q},ratio:108.25,exact:true,"
         f"filters:{{{Q}3{Q}:{Q}x{Q},deep:{{n:[1,2,{Q}s{Q}]}}}},tags:[{Q}t1{Q},{Q}t2{Q}]}}<tool_call|>", parser="gemma4",
         calls=[call("search", {"query": "a, b}", "ratio": 108.25, "exact": True,
                                "filters": {"3": "x", "deep": {"n": [1, 2, "s"]}}, "tags": ["t1", "t2"]})]),
    case("gemma4/dashed-name", f"<|tool_call>call:my-tool.v2{{x:{Q}1{Q}}}<tool_call|>", parser="gemma4",
         calls=[call("my-tool.v2", {"x": "1"}, offered=False)]),
    case("gemma4/end-marker-in-string", f"<|tool_call>call:write_file{{path:{Q}a{Q},content:{Q}x<tool_call|>y{Q}}}"
         "<tool_call|>", parser="gemma4", calls=[call("write_file", {"path": "a", "content": "x<tool_call|>y"})]),
    case("gemma4/with-thought", "<|channel>thought\nplan<channel|>Sure.<|tool_call>call:get_time{}<tool_call|><turn|>",
         parser="gemma4", reasoning_parser="gemma4", reasoning="plan", content="Sure.", calls=[call("get_time")]),
    case("gemma4/truncated", f"<|tool_call>call:get_weather{{city:{Q}Par", parser="gemma4", truncated=True,
         content=f"<|tool_call>call:get_weather{{city:{Q}Par"),
    case("gemma4/missing-end-marker", "<|tool_call>call:get_time{}", parser="gemma4", truncated=True,
         content="<|tool_call>call:get_time{}"),
    case("functiongemma/single", "<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:"
         "<escape>2<escape>}<end_function_call>", parser="functiongemma",
         calls=[call("get_weather", {"city": "Paris", "days": 2})]),
    case("functiongemma/untyped-bare", "<start_function_call>call:get_weather{city:<escape>Oslo<escape>,extra:7}"
         "<end_function_call>", parser="functiongemma", calls=[call("get_weather", {"city": "Oslo", "extra": 7})]),
    case("functiongemma/malformed", "<start_function_call>call:get_weather{city:<escape>Oslo}<end_function_call>",
         parser="functiongemma", content="<start_function_call>call:get_weather{city:<escape>Oslo}<end_function_call>"),
    # Typed values (vLLM test_functiongemma_tool_parser: escaped numbers/booleans are JSON when untyped;
    # test_gemma4_tool_parser: bare numbers, "108." is 108.0, null is None).
    case("functiongemma/bare-typed-values", "<start_function_call>call:search{query:<escape>q<escape>,limit:5,"
         "exact:true,ratio:0.5,filters:{a:null}}<end_function_call>", parser="functiongemma",
         calls=[call("search", {"query": "q", "limit": 5, "exact": True, "ratio": 0.5, "filters": {"a": None}})]),
    case("functiongemma/escaped-untyped-json", "<start_function_call>call:count_things{count:<escape>42<escape>,"
         "enabled:<escape>true<escape>,label:<escape>Hello World<escape>}<end_function_call>", parser="functiongemma",
         calls=[call("count_things", {"count": 42, "enabled": True, "label": "Hello World"}, offered=False)]),
    case("functiongemma/escaped-string-schema-wins", "<start_function_call>call:search{query:<escape>12<escape>,"
         "limit:<escape>7<escape>,exact:<escape>false<escape>}<end_function_call>", parser="functiongemma",
         calls=[call("search", {"query": "12", "limit": 7, "exact": False})]),
    case("functiongemma/trailing-dot-number", "<start_function_call>call:search{ratio:108.,limit:+3}"
         "<end_function_call>", parser="functiongemma", calls=[call("search", {"ratio": 108.0, "limit": 3})]),
    case("functiongemma/complete-without-end-marker", "<start_function_call>call:get_weather{city:<escape>Oslo"
         "<escape>}", parser="functiongemma", calls=[call("get_weather", {"city": "Oslo"})]),
    case("functiongemma/truncated", "<start_function_call>call:get_weather{city:<escape>Os", parser="functiongemma",
         truncated=True, content="<start_function_call>call:get_weather{city:<escape>Os"),
    case("gemma4/trailing-dot-number", f"<|tool_call>call:search{{ratio:108.,limit:5,query:{Q}x{Q}}}<tool_call|>",
         parser="gemma4", calls=[call("search", {"ratio": 108.0, "limit": 5, "query": "x"})]),
    case("gemma4/python-numerals", "<|tool_call>call:search{ratio:-.5,limit:007,filters:{a:1.,b:null,c:[2.,1e3]}}"
         "<tool_call|>", parser="gemma4",
         calls=[call("search", {"ratio": -0.5, "limit": 7, "filters": {"a": 1.0, "b": None, "c": [2.0, 1000.0]}})]),
    case("gemma4/untyped-string-stays-text", f"<|tool_call>call:get_weather{{city:{Q}Oslo{Q},zip:{Q}0150{Q}}}"
         "<tool_call|>", parser="gemma4", calls=[call("get_weather", {"city": "Oslo", "zip": "0150"})]),
    # vLLM test_gemma4_tool_parser (test_empty_value): ``key:`` with no value is "".
    case("gemma4/empty-value-last", f"<|tool_call>call:get_weather{{city:{Q}Oslo{Q},unit:}}<tool_call|>",
         parser="gemma4", calls=[call("get_weather", {"city": "Oslo", "unit": ""})]),
    case("gemma4/empty-value-first", f"<|tool_call>call:get_weather{{unit: ,city:{Q}Oslo{Q}}}<tool_call|>",
         parser="gemma4", calls=[call("get_weather", {"unit": "", "city": "Oslo"})]),
    # vLLM test_functiongemma_tool_parser (streamed two/three keys): no comma between the pairs.
    case("functiongemma/keys-without-commas", "<start_function_call>call:get_weather{city:<escape>NYC<escape>"
         "unit:<escape>C<escape>}<end_function_call>", parser="functiongemma",
         calls=[call("get_weather", {"city": "NYC", "unit": "C"})]),
    case("functiongemma/three-keys-without-commas", "<start_function_call>call:search{query:<escape>python<escape>"
         "limit:<escape>10<escape>tags:[<escape>a<escape>]exact:<escape>true<escape>}<end_function_call>",
         parser="functiongemma", calls=[call("search", {"query": "python", "limit": 10, "tags": ["a"], "exact": True})]),
    case("gemma4/keys-without-commas", f"<|tool_call>call:get_weather{{city:{Q}Oslo{Q} days:2}}<tool_call|>",
         parser="gemma4", calls=[call("get_weather", {"city": "Oslo", "days": 2})]),
    case("functiongemma/bare-values-need-commas", "<start_function_call>call:search{limit:10 exact:true}"
         "<end_function_call>", parser="functiongemma",
         content="<start_function_call>call:search{limit:10 exact:true}<end_function_call>"),
]
