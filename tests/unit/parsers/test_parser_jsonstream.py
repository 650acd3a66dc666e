"""The incremental JSON reader: compact re-emission equals json.dumps, under any chunking."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.jsonstream import JsonReader, JsonSyntaxError

scalars = (st.none() | st.booleans() | st.integers(-10**20, 10**20)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                            max_size=4), max_leaves=20)


def read(text: str, cuts: list[int]):
    reader, out, pos = JsonReader(), [], 0
    points = [*sorted({c for c in cuts if 0 < c < len(text)}), len(text)]
    for point in points:
        if reader.done:
            break
        used = reader.feed(text[pos:point])
        out.append(reader.take())
        pos += used
    reader.finish()
    out.append(reader.take())
    return reader, "".join(out), pos


@settings(max_examples=100, deadline=None)
@given(values, st.booleans(), st.booleans(), st.lists(st.integers(0, 400), max_size=30))
def test_round_trip_any_chunking(value, ascii_, indent, cuts):
    text = json.dumps(value, ensure_ascii=ascii_, indent=2 if indent else None)
    reader, emitted, used = read(text + "  tail", cuts)
    assert reader.done
    assert reader.value == value
    assert emitted == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert (text + "  tail")[used:].strip() in ("tail", "")


@pytest.mark.parametrize("bad", ['{"a": NaN}', '{"a": 1e999}', '[1,,2]', '{"a" 1}', '{a: 1}', '"\\x"', "tru e", "-"])
def test_rejects_invalid(bad):
    with pytest.raises(JsonSyntaxError):
        reader = JsonReader()
        reader.feed(bad)
        if not reader.finish():
            raise JsonSyntaxError("incomplete")


def test_lenient_bits():
    reader = JsonReader()
    reader.feed('{"a": [1, 2,], "b": "raw\nnewline", "c": True, "a": 9, "d": "\\ud800x"}')
    assert reader.value == {"a": [1, 2], "b": "raw\nnewline", "c": True, "d": "\ufffdx"}
    assert reader.take() == '{"a":[1,2],"b":"raw\\nnewline","c":true,"d":"\ufffdx"}'


def test_stops_at_value_end():
    reader = JsonReader()
    assert reader.feed('  {"a": 1}</tool_call>') == 10
    assert reader.done and reader.value == {"a": 1}
