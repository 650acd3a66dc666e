"""Schema typing of raw-text values, the tool set, and the lenient pythonic parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.pylit import NeedMore, PyLitError, parse_calls
from parsers.schema import ToolSet, coerce_value, schema_types


@pytest.mark.parametrize(("raw", "schema", "expected"), [
    ("42", {"type": "integer"}, 42),
    ("42", {"type": "string"}, "42"),
    ("42", None, "42"),
    ("  7 ", {"type": "integer"}, 7),
    ("-3.5", {"type": "number"}, -3.5),
    ("3", {"type": "number"}, 3),
    ("1e999", {"type": "number"}, "1e999"),
    ("true", {"type": "boolean"}, True),
    ("False", {"type": "boolean"}, False),
    ("null", {"type": ["integer", "null"]}, None),
    ("null", {"anyOf": [{"type": "string"}, {"type": "null"}]}, None),
    ("5", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 5),
    ("None", {"type": "integer", "nullable": True}, None),
    ('{"a": [1]}', {"type": "object"}, {"a": [1]}),
    ("{'a': True}", {"type": "object"}, {"a": True}),
    ("[1, 2]", {"type": "array"}, [1, 2]),
    ("not json", {"type": "object"}, "not json"),
    ("abc", {"type": "integer"}, "abc"),
    ("B", {"enum": ["A", "B"]}, "B"),
    ("2", {"enum": [1, 2]}, 2),
    ("\n  keep  \n", {"type": "string"}, "\n  keep  \n"),
    ("[1, 2]", None, "[1, 2]"),
])
def test_coerce_value(raw, schema, expected):
    assert coerce_value(raw, schema) == expected


@pytest.mark.parametrize(("raw", "expected"), [("[1, 2]", [1, 2]), ("3", 3), ("hello", "hello"), ("NaN", "NaN")])
def test_json_fallback(raw, expected):
    assert coerce_value(raw, None, "json") == expected


def test_schema_types():
    assert schema_types({"type": ["integer", "null"]}) == {"integer", "null"}
    assert schema_types({"oneOf": [{"type": "string"}, {"type": "array"}]}) == {"string", "array"}
    assert schema_types({"type": "int"}) == {"integer"}
    assert schema_types({}) == set()


def test_toolset_forms():
    tools = ToolSet([{"type": "function", "function": {"name": "a", "parameters": {"properties": {"x": {"type": "string"}}}}},
                     {"name": "b"}, "junk", {"function": {"name": ""}}])
    assert tools.names == {"a", "b"}
    assert tools.offered("a") and not tools.offered("c")
    assert tools.only_string("a", "x", default=False)
    assert not tools.only_string("b", "x", default=False)
    assert ToolSet(None).offered("anything")
    assert not ToolSet([]).offered("anything")


def test_pylit_lenient_strings_and_partial():
    calls, end = parse_calls("[f(a='it's', b=\"x\\\"y\", c='''tri'ple''')] tail")
    assert calls == [("f", {"a": "it's", "b": 'x"y', "c": "tri'ple"})]
    assert end == len("[f(a='it's', b=\"x\\\"y\", c='''tri'ple''')]")
    with pytest.raises(NeedMore):
        parse_calls("[f(a='x")
    with pytest.raises(PyLitError):
        parse_calls("[1, 2]")


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
                       st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.text(max_size=30)
                       | st.lists(st.integers(), max_size=3), max_size=5))
def test_pylit_round_trips_python_repr(kwargs):
    text = "[tool(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")]"
    calls, end = parse_calls(text)
    assert calls == [("tool", kwargs)] and end == len(text)
