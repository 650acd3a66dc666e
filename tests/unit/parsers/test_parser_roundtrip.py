"""Round trip: render random calls the way each family's template writes them, parse them
back under random chunking, and get the same name and arguments (tool-formats.md §5)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import stream_output

names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
keys = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=8)
json_args = st.dictionaries(keys, json_values, max_size=4)
string_args = st.dictionaries(keys, text, max_size=4)


def _j(value):
    return json.dumps(value, ensure_ascii=False)


def _xml(name, args, fn, param, close_param, close_fn, wrap=("", "")):
    return wrap[0] + fn(name) + "".join(param(k) + v + close_param for k, v in args.items()) + close_fn + wrap[1]


RENDER_JSON = {
    "hermes": lambda n, a: f"<tool_call>\n{_j({'name': n, 'arguments': a})}\n</tool_call>",
    "llama3_json": lambda n, a: "<|python_tag|>" + _j({"name": n, "parameters": a}),
    "mistral": lambda n, a: f"[TOOL_CALLS]{n}[ARGS]{_j(a)}",
    "kimi_k2": lambda n, a: (f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{n}:0"
                             f"<|tool_call_argument_begin|>{_j(a)}<|tool_call_end|><|tool_calls_section_end|>"),
    "deepseek_v3": lambda n, a: (f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_j(a)}"
                                 "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    "deepseek_v31": lambda n, a: (f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}"
                                  "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    "openai": lambda n, a: f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{_j(a)}<|call|>",
    "phi4_mini_json": lambda n, a: "functools[" + _j({"name": n, "arguments": a}) + "]",
    "granite": lambda n, a: "<|tool_call|>[" + _j({"name": n, "arguments": a}) + "]",
    "jamba": lambda n, a: "<tool_calls>[" + _j({"name": n, "arguments": a}) + "]</tool_calls>",
    "internlm": lambda n, a: "<|action_start|><|plugin|>" + _j({"name": n, "parameters": a}) + "<|action_end|>",
    "apertus": lambda n, a: "<|tools_prefix|>[" + _j({n: a}) + "]<|tools_suffix|>",
    "pythonic": lambda n, a: f"[{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")]",
}
RENDER_TEXT = {
    "qwen3_coder": lambda n, a: _xml(n, a, lambda f: f"<tool_call>\n<function={f}>\n", lambda k: f"<parameter={k}>\n",
                                     "\n</parameter>\n", "</function>\n</tool_call>"),
    "seed_oss": lambda n, a: _xml(n, a, lambda f: f"<seed:tool_call>\n<function={f}>\n", lambda k: f"<parameter={k}>\n",
                                  "\n</parameter>\n", "</function>\n</seed:tool_call>"),
    "minimax_m2": lambda n, a: _xml(n, a, lambda f: f'<minimax:tool_call>\n<invoke name="{f}">\n',
                                    lambda k: f'<parameter name="{k}">', "</parameter>\n", "</invoke>\n</minimax:tool_call>"),
    "deepseek_v32": lambda n, a: _xml(n, a, lambda f: f'<｜DSML｜function_calls>\n<｜DSML｜invoke name="{f}">\n',
                                      lambda k: f'<｜DSML｜parameter name="{k}" string="true">', "</｜DSML｜parameter>\n",
                                      "</｜DSML｜invoke>\n</｜DSML｜function_calls>"),
    "step3": lambda n, a: _xml(n, a, lambda f: f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{f}">',
                               lambda k: f'<steptml:parameter name="{k}">', "</steptml:parameter>",
                               "</steptml:invoke><｜tool_call_end｜>"),
    "glm47": lambda n, a: f"<tool_call>{n}" + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"
                                                     for k, v in a.items()) + "</tool_call>",
    "gemma4": lambda n, a: f"<|tool_call>call:{n}{{" + ",".join(f'{k}:<|"|>{v}<|"|>' for k, v in a.items()) + "}<tool_call|>",
}


def _chunks(data, rendered):
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(rendered)), max_size=16), label="cuts")))
    return [rendered[a:b] for a, b in zip([0, *cuts], [*cuts, len(rendered)], strict=True)]


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("family", sorted(RENDER_JSON))
def test_json_families_round_trip(family):
    @SETTINGS
    @given(names, json_args if family != "pythonic" else st.dictionaries(keys, json_values.filter(
        lambda v: not isinstance(v, float) or v == v), max_size=4), st.data())
    def prop(name, args, data):
        # Pythonic lists only count at call position: there the text goes after the call.
        call = RENDER_JSON[family](name, args)
        rendered = call + " Done." if family == "pythonic" else "Done. " + call
        result = stream_output(_chunks(data, rendered), tool_parser=family)
        assert result["content"] == "Done."
        assert [(c["name"], c["arguments"]) for c in result["tool_calls"]] == [(name, args)]

    prop()


@pytest.mark.parametrize("family", sorted(RENDER_TEXT))
def test_text_valued_families_round_trip(family):
    @SETTINGS
    @given(names, string_args, st.data())
    def prop(name, args, data):
        tools = [{"name": name, "parameters": {"type": "object",
                                               "properties": {k: {"type": "string"} for k in args}}}]
        rendered = "Sure. " + RENDER_TEXT[family](name, args)
        result = stream_output(_chunks(data, rendered), tool_parser=family, tools=tools)
        assert result["content"] == "Sure."
        assert [(c["name"], c["arguments"]) for c in result["tool_calls"]] == [(name, args)]

    prop()
