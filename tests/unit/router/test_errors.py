"""Error rendering: each API's shape and type per status, truncated echoes, the 408's Connection: close."""

from __future__ import annotations

import json

import pytest
from litestar import post
from litestar.exceptions import MethodNotAllowedException
from litestar.handlers import HTTPRouteHandler
from litestar.testing import create_test_client

from router.errors import (
    ModelNotFoundError,
    RequestTimeoutError,
    as_router_error,
    error_body,
    handle_exception,
    shown,
)


def test_shown_keeps_short_strings_whole():
    assert shown("qwen") == "qwen"
    assert shown("x" * 100) == "x" * 100


def test_shown_truncates_and_says_how_long():
    assert shown("abcdef", limit=3) == "abc…(6 chars)"
    long = "m" * 1024 * 1024
    assert shown(long) == "m" * 100 + "…(1048576 chars)"


def test_model_not_found_does_not_echo_a_huge_name():
    error = ModelNotFoundError("m" * 1024 * 1024)
    assert len(error.message) < 300
    assert "…(1048576 chars)" in error.message
    assert error.status == 404 and error.code == "model_not_found" and error.param == "model"
    assert ModelNotFoundError("ghost").message == "The model `ghost` does not exist or you do not have access to it."


def test_request_timeout_in_both_dialects():
    error = RequestTimeoutError("too slow")
    assert error_body(error) == {
        "error": {"message": "too slow", "type": "invalid_request_error", "param": None, "code": "request_timeout"}
    }
    assert error_body(error, anthropic=True) == {"type": "error", "error": {"type": "timeout_error", "message": "too slow"}}


def test_method_not_allowed_in_both_dialects():
    error = as_router_error(MethodNotAllowedException())
    assert error.status == 405
    openai = error_body(error)["error"]
    assert openai["type"] == "invalid_request_error" and openai["code"] == "method_not_allowed"
    assert error_body(error, anthropic=True)["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(("status", "kind"), [(400, "invalid_request_error"), (404, "not_found_error"), (429, "rate_limit_error"),
                                              (500, "api_error"), (503, "overloaded_error")])
def test_anthropic_types_of_other_statuses_are_unchanged(status, kind):
    error = RequestTimeoutError("x")
    error.status = status
    assert error_body(error, anthropic=True)["error"]["type"] == kind


def _timeout_app() -> list[HTTPRouteHandler]:
    @post("/v1/chat/completions")
    async def chat() -> None:
        raise RequestTimeoutError("late body")

    @post("/v1/messages")
    async def messages() -> None:
        raise RequestTimeoutError("late body")

    return [chat, messages]


def test_handler_renders_408_with_connection_close_in_the_route_dialect():
    with create_test_client(_timeout_app(), exception_handlers={Exception: handle_exception}) as client:
        openai = client.post("/v1/chat/completions")
        assert openai.status_code == 408 and openai.headers["connection"] == "close"
        assert openai.json()["error"]["code"] == "request_timeout"
        anthropic = client.post("/v1/messages")
        assert anthropic.status_code == 408 and anthropic.headers["connection"] == "close"
        assert json.loads(anthropic.content) == {"type": "error", "error": {"type": "timeout_error", "message": "late body"}}


def test_wrong_method_is_405_in_the_route_dialect():
    with create_test_client(_timeout_app(), exception_handlers={Exception: handle_exception}) as client:
        openai = client.get("/v1/chat/completions")
        assert openai.status_code == 405
        assert openai.json()["error"]["type"] == "invalid_request_error"
        anthropic = client.get("/v1/messages")
        assert anthropic.status_code == 405
        assert anthropic.json()["error"]["type"] == "invalid_request_error"
