"""Malformed output must never raise, break the event contract, or depend on chunking.

Each family's well-formed rendering is mutated (slices dropped, duplicated, or marker
fragments spliced in) and parsed whole and under random chunking.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parsers_harness import check_events, run
from parsers import TOOL_PARSERS
from router.bench.scripted_tools import RENDER

FAMILIES = sorted(RENDER)
FRAGMENTS = ["<tool_call>", "</tool_call>", "<", ">", "{", "}", "[", "]", '"', "\\", "\n", "</parameter>",
             "<parameter=", "<function=", "<|", "|>", "```", ":", ",", "<think>", "</think>", "<|call|>", "[ARGS]",
             "<｜tool▁call▁end｜>", "<|tool_call_end|>", "null", "'", "é"]


def _render(family: str) -> str:
    args = {"city": "Paris", "note": 'a "quoted"\nline'}
    return "Intro. " + RENDER[family]([("get_weather", args), ("get_time", {})])


def _strip_ids(result: dict) -> dict:
    assert all(isinstance(c["id"], str) and c["id"] for c in result["tool_calls"])
    return {**result, "tool_calls": [{**c, "id": None} for c in result["tool_calls"]]}


@st.composite
def mutated(draw, text: str) -> str:
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        op = draw(st.sampled_from(["drop", "dup", "insert", "cut"]))
        if op == "drop":
            text = text[:i] + text[j:]
        elif op == "dup":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(FRAGMENTS)) + text[i:]
        else:
            text = text[:i]
    return text


@pytest.mark.parametrize("family", FAMILIES)
def test_mutations_never_raise_and_are_split_invariant(family):
    base = _render(family)
    case = {"parser": family, "reasoning_parser": "qwen3", "tools": None, "forced": False, "calls": []}

    @settings(max_examples=50, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutated(base), st.data())
    def prop(text, data):
        cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=12), label="cuts")))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        whole, events, truncated = run(case, [text])
        check_events(case, events)
        split, events, truncated_split = run(case, chunks)
        check_events(case, events)
        one, _, _ = run(case, list(text))
        assert _strip_ids(split) == _strip_ids(whole) == _strip_ids(one)
        assert truncated == truncated_split
        for call in whole["tool_calls"]:
            assert isinstance(call["arguments"], dict)
            json.dumps(call["arguments"], allow_nan=False)

    prop()


def test_fuzz_covers_most_families():
    assert len(FAMILIES) >= 20 and set(FAMILIES) <= set(TOOL_PARSERS)
