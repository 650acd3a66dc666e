"""Router errors and the one place that turns exceptions into each API's error body.

Handlers raise; only the exception handlers registered here render. OpenAI's shape is
``{"error": {"message", "type", "param", "code"}}``; Anthropic routes (``/v1/messages``)
get ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException

from engines.errors import EngineRequestError, WorkerDiedError, WorkerLoadError, WorkerNotReadyError

logger = logging.getLogger(__name__)


def shown(value: str, limit: int = 100) -> str:
    """A client string fit to echo in a message: at most ``limit`` characters, then how long it was."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…({len(value)} chars)"


class RouterError(Exception):
    """An error with an HTTP status and OpenAI ``type``/``code``/``param`` fields."""

    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after_s = retry_after_s


class InvalidRequestError(RouterError):
    status, type, code = 400, "invalid_request_error", "invalid_value"


class ContextLengthError(InvalidRequestError):
    code = "context_length_exceeded"

    def __init__(self, prompt_tokens: int, max_context: int, *, param: str = "messages") -> None:
        super().__init__(
            f"This model's maximum context length is {max_context} tokens. However, your request has "
            f"{prompt_tokens} prompt tokens. Please reduce the length of the input.",
            param=param,
        )
        self.prompt_tokens = prompt_tokens
        self.max_context = max_context


class AuthenticationError(RouterError):
    """No key, or one that is not configured (401). The message never echoes what was sent."""

    status, type, code = 401, "invalid_request_error", "invalid_api_key"


class PermissionDeniedError(RouterError):
    """A valid key that may not use this model or route (403)."""

    status, type, code = 403, "permission_error", "permission_denied"


class ModelNotFoundError(RouterError):
    status, type, code = 404, "invalid_request_error", "model_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"The model `{shown(name)}` does not exist or you do not have access to it.", param="model")


class RequestTimeoutError(RouterError):
    """The request did not arrive in time (408); the connection is closed after the reply."""

    status, type, code = 408, "invalid_request_error", "request_timeout"


class OverloadedError(RouterError):
    status, type, code = 429, "rate_limit_exceeded", "rate_limit_exceeded"


class ModelUnavailableError(RouterError):
    """The model is loading, restarting or failed to load (503, with Retry-After)."""

    status, type, code = 503, "server_error", "model_unavailable"


class EngineFailureError(RouterError):
    status, type, code = 500, "server_error", "engine_error"


_HTTP_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "request_too_large",
}
# OpenAI has no code for these, but a stable one lets clients tell them apart from a 400.
_HTTP_STATUS_CODES = {405: "method_not_allowed", 408: "request_timeout"}


def as_router_error(exc: BaseException) -> RouterError:
    """Map engine and framework exceptions onto RouterError (the four-step rule's last steps)."""
    if isinstance(exc, RouterError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        # Concurrent generations (a multi-prompt completion) fail as a group: report the first.
        return as_router_error(exc.exceptions[0])
    if isinstance(exc, WorkerNotReadyError):
        return ModelUnavailableError(str(exc), retry_after_s=exc.retry_after_s)
    if isinstance(exc, (WorkerDiedError, WorkerLoadError)):
        return ModelUnavailableError(str(exc), retry_after_s=5.0)
    if isinstance(exc, EngineRequestError):
        # The worker's message is in our words; exception details stay in its log.
        return InvalidRequestError(str(exc)) if exc.invalid else EngineFailureError(str(exc))
    if isinstance(exc, ValidationException):
        return InvalidRequestError(str(exc.detail))
    if isinstance(exc, HTTPException):
        error = RouterError(str(exc.detail))
        error.status = exc.status_code
        error.type = _HTTP_STATUS_TYPES.get(exc.status_code, "server_error" if exc.status_code >= 500 else "invalid_request_error")
        error.code = "not_found" if isinstance(exc, NotFoundException) else _HTTP_STATUS_CODES.get(exc.status_code)
        if exc.status_code == 413:
            error.message = "Request body too large."
        return error
    logger.error("unhandled error", exc_info=exc)
    return EngineFailureError("Internal server error.")


def is_anthropic_path(path: str) -> bool:
    return path.startswith("/v1/messages")


# Anthropic's error types by status (its errors page); anything else is an api_error.
_ANTHROPIC_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_body(error: RouterError, *, anthropic: bool = False) -> dict[str, Any]:
    """The JSON body of an error in the API's own dialect."""
    if anthropic:
        message = error.message
        if isinstance(error, ContextLengthError):
            # The exact text Claude Code's auto-compaction looks for.
            message = f"prompt is too long: {error.prompt_tokens} tokens > {error.max_context} maximum"
        kind = _ANTHROPIC_STATUS_TYPES.get(error.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}


def handle_exception(request: Request, exc: Exception) -> Response:
    """Litestar exception handler for every route."""
    error = as_router_error(exc)
    # For the metrics' before_send hook (router/ops/metrics/http.py): why the request was refused.
    request.scope.setdefault("state", {})["error_code"] = error.code or error.type
    headers = {}
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(error.retry_after_s)))
    if error.status == 408:
        # The rest of a late body may still be on the wire; the connection cannot be reused.
        headers["Connection"] = "close"
    if error.status >= 500:
        logger.warning("%s %s -> %d: %s", request.method, request.url.path, error.status, error.message)
    return Response(error_body(error, anthropic=is_anthropic_path(request.url.path)), status_code=error.status, headers=headers)
