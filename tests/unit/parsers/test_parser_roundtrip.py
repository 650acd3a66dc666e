"""Round trip: render random calls the way each family's template writes them, parse them
back under random chunking, and get the same name and arguments (tool-formats.md §5)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import stream_output
from router.bench.scripted_tools import RENDER

names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
keys = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=8)
json_args = st.dictionaries(keys, json_values, max_size=4)
string_args = st.dictionaries(keys, text, max_size=4)


# Each family's output as its template writes it: the same renderers `rapid-mlx bench tools-scripted` uses.
JSON_FAMILIES = ("hermes", "llama3_json", "mistral", "kimi_k2", "deepseek_v3", "deepseek_v31", "openai", "phi4_mini_json",
                 "granite", "jamba", "internlm", "apertus", "pythonic")
# Families that write parameter values as raw text (typed back by the tool's schema).
TEXT_FAMILIES = ("qwen3_coder", "seed_oss", "minimax_m2", "deepseek_v32", "step3", "glm47", "gemma4")


def render(family, name, args):
    return RENDER[family]([(name, args)])


def _chunks(data, rendered):
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(rendered)), max_size=16), label="cuts")))
    return [rendered[a:b] for a, b in zip([0, *cuts], [*cuts, len(rendered)], strict=True)]


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("family", JSON_FAMILIES)
def test_json_families_round_trip(family):
    @SETTINGS
    @given(names, json_args if family != "pythonic" else st.dictionaries(keys, json_values.filter(
        lambda v: not isinstance(v, float) or v == v), max_size=4), st.data())
    def prop(name, args, data):
        # Pythonic lists only count at call position: there the text goes after the call.
        call = render(family, name, args)
        rendered = call + " Done." if family == "pythonic" else "Done. " + call
        result = stream_output(_chunks(data, rendered), tool_parser=family)
        assert result["content"] == "Done."
        assert [(c["name"], c["arguments"]) for c in result["tool_calls"]] == [(name, args)]

    prop()


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_text_valued_families_round_trip(family):
    @SETTINGS
    @given(names, string_args, st.data())
    def prop(name, args, data):
        tools = [{"name": name, "parameters": {"type": "object",
                                               "properties": {k: {"type": "string"} for k in args}}}]
        rendered = "Sure. " + render(family, name, args)
        result = stream_output(_chunks(data, rendered), tool_parser=family, tools=tools)
        assert result["content"] == "Sure."
        assert [(c["name"], c["arguments"]) for c in result["tool_calls"]] == [(name, args)]

    prop()
