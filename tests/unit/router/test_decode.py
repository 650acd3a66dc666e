"""Request bodies decode leniently and fail with OpenAI-style 400s naming the field."""

from __future__ import annotations

import pytest

from router.errors import InvalidRequestError, error_body
from router.api.decode import decode_body
from router.api.openai.schemas import ChatCompletionBody


def test_unknown_fields_are_ignored_and_numbers_coerced():
    body = decode_body(b'{"model": "m", "messages": [], "max_tokens": "5", "store": true, "metadata": {"a": 1}}', ChatCompletionBody)
    assert body.max_tokens == 5


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b'{"model": "m", "temperature": "hot"}', "temperature"),
        (b'{"model": "m", "stream_options": {"include_usage": "maybe"}}', "stream_options.include_usage"),
        (b'{"messages": []}', None),
        (b"[1, 2]", None),
        (b"{", None),
        (b"   ", None),
    ],
)
def test_bad_bodies_raise_400_with_param(raw, param):
    with pytest.raises(InvalidRequestError) as info:
        decode_body(raw, ChatCompletionBody)
    body = error_body(info.value)["error"]
    assert info.value.status == 400 and body["type"] == "invalid_request_error" and body["param"] == param
