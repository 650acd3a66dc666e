"""Typed field reads: JSON types as clients mean them, paths and texts in each API's dialect."""

from __future__ import annotations

import pytest

from router.turn.fields import (
    anthropic_path, expect, is_kind, kind_of, openai_path, opt_bool, opt_object, opt_str, optional, req_object, req_str,
)
from router.errors import InvalidRequestError


def test_paths_are_spelt_as_each_api_spells_them():
    assert (openai_path("messages") / 0 / "tool_calls" / 1 / "function").text == "messages[0].tool_calls[1].function"
    assert (anthropic_path("messages") / 0 / "content" / 1 / "text").text == "messages.0.content.1.text"
    assert (openai_path("") / "tools").text == "tools"


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (True, int, False), (True, float, False), (True, bool, True), (0, bool, False),
        (3, float, True), (3.5, int, False), (2**70, int, True), ("5", int, False), (None, str, False),
        ([], list, True), ({}, dict, True), ({}, list, False),
    ],
)
def test_json_kinds(value, kind, expected):
    assert is_kind(value, kind) is expected


def test_openai_wrong_type_names_the_path_and_both_types():
    with pytest.raises(InvalidRequestError) as info:
        opt_str({"text": 5}, "text", openai_path("messages") / 0 / "content" / 1)
    assert info.value.param == "messages[0].content[1].text" and info.value.status == 400
    assert info.value.message == "Invalid type for 'messages[0].content[1].text': expected a string, but got an integer instead."


def test_anthropic_wrong_type_uses_its_own_words():
    with pytest.raises(InvalidRequestError) as info:
        opt_object({"input": [1]}, "input", anthropic_path("messages") / 1 / "content" / 0)
    assert info.value.param == "messages.1.content.0.input"
    assert info.value.message == "messages.1.content.0.input: Input should be a valid dictionary"


def test_unions_list_every_accepted_type():
    with pytest.raises(InvalidRequestError) as info:
        optional({"arguments": 5}, "arguments", openai_path("f"), str, dict)
    assert "expected one of a string or an object, but got an integer" in info.value.message


def test_null_is_absent_and_required_fields_say_so():
    assert opt_str({"name": None}, "name", openai_path("tools")) is None
    assert opt_bool({}, "strict", openai_path("tools")) is None
    with pytest.raises(InvalidRequestError) as info:
        req_str({"name": None}, "name", openai_path("tools") / 0)
    assert info.value.param == "tools[0].name" and info.value.message == "Missing required parameter: 'tools[0].name'."
    with pytest.raises(InvalidRequestError) as info:
        req_object({}, "function", anthropic_path("tools") / 0)
    assert info.value.message == "tools.0.function: Field required"


def test_kind_of_skips_nothing_it_cannot_compare():
    assert kind_of({"type": "made_up"}, openai_path("x")) == "made_up"  # unknown: the caller skips it
    assert kind_of({}, openai_path("x")) is None
    with pytest.raises(InvalidRequestError) as info:
        kind_of({"type": ["text"]}, openai_path("input") / 3)  # a list is unhashable: once a 500
    assert info.value.param == "input[3].type"


def test_expect_returns_the_value():
    assert expect([1], openai_path("x"), str, list) == [1]
