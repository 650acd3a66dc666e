"""Passing one request to an upstream's same endpoint and its reply back, in the client API's terms.

The body goes up as the client sent it, with `model` set to the upstream's name for it; headers go
up from an allowlist (the front's client keys never do: the upstream's own key, from `api_key_env`,
is added instead). A stream comes back event by event as it arrives, the model name rewritten back
to the client's (rewrite.py); an error status comes back in the client API's error shape; an
upstream that cannot be reached answers 503 with Retry-After. A client that goes away closes the
upstream response, and with it the upstream's stream and its slot.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
from litestar import Response
from litestar.response import Stream

from router.admission import on_release
from router.errors import ModelUnavailableError, OverloadedError, RouterError, error_body
from router.http.request_id import request_id
from router.ops.metrics.families import Metrics
from router.sse import data_frame, event_frame, sse_response
from router.upstream.client import Upstream
from router.upstream.rewrite import SseFrames, rewrite_model

__all__ = ["API_CHAT", "API_COMPLETIONS", "API_COUNT_TOKENS", "API_MESSAGES", "API_RESPONSES", "Api", "forward",
           "UpstreamTimeoutError", "UpstreamUnreachableError"]

logger = logging.getLogger(__name__)

# Client headers an upstream may need to read the request the same way; nothing that authenticates.
_FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
_encode = msgspec.json.Encoder().encode
_MAX_ERROR_BODY = 64 * 1024


class UpstreamUnreachableError(ModelUnavailableError):
    code = "upstream_unreachable"


class UpstreamTimeoutError(RouterError):
    status, type, code = 504, "server_error", "upstream_timeout"


@dataclass(frozen=True)
class Api:
    """One endpoint as the proxy sees it."""

    name: str
    path: str  # below the upstream's base URL (which ends in /v1)
    anthropic: bool
    error_frame: Callable[[RouterError], bytes]
    generates: bool = True  # takes a place in a model's queue (what spillover relieves)


def _openai_frame(error: RouterError) -> bytes:
    return data_frame(error_body(error))


def _anthropic_frame(error: RouterError) -> bytes:
    return event_frame("error", error_body(error, anthropic=True))


def _responses_frame(error: RouterError) -> bytes:
    return event_frame("error", {"type": "error", "code": error.code, "message": error.message, "param": error.param})


API_CHAT = Api("chat", "/chat/completions", False, _openai_frame)
API_COMPLETIONS = Api("completions", "/completions", False, _openai_frame)
API_RESPONSES = Api("responses", "/responses", False, _responses_frame)
API_MESSAGES = Api("messages", "/messages", True, _anthropic_frame)
API_COUNT_TOKENS = Api("count_tokens", "/messages/count_tokens", True, _anthropic_frame, generates=False)


async def forward(upstream: Upstream, api: Api, body: dict[str, Any], *, client_name: str,
                  client_headers: Mapping[str, str], metrics: Metrics) -> Response | Stream:
    """Send ``body`` to ``upstream``'s ``api`` endpoint; its reply, as the client should get it.

    Raises:
        UpstreamUnreachableError: the upstream is known to be down, or could not be reached now (503).
        OverloadedError: ``max_concurrency`` requests are in flight on it (429).
        UpstreamTimeoutError: no response headers within ``timeout_s`` (504).
        RouterError: the upstream answered an error status, carried over in the client API's shape.
    """
    if not upstream.health.available:
        raise UpstreamUnreachableError(f"Upstream model {upstream.model_id!r} is unreachable: {upstream.health.last_error}",
                                       retry_after_s=upstream.health.retry_after_s())
    if upstream.inflight >= upstream.config.max_concurrency:
        raise OverloadedError(f"Upstream model {upstream.model_id!r} has {upstream.inflight} requests in flight "
                              f"(max_concurrency {upstream.config.max_concurrency}); try again in 1s.", retry_after_s=1.0)
    upstream.take()
    on_release(upstream.give_back)
    request = upstream.post(api.path, _encode({**body, "model": upstream.upstream_model}), _headers(upstream, api, client_headers))
    response = await _send(upstream, request, metrics)
    if response.status_code >= 400:
        raise await _error_of(upstream, response, metrics)
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        try:
            data = await response.aread()
        finally:
            await response.aclose()
        return Response(rewrite_model(data, client_name), status_code=response.status_code,
                        media_type=response.headers.get("content-type", "application/json"))
    return sse_response(_relay(upstream, response, client_name, metrics), api.error_frame)


def _headers(upstream: Upstream, api: Api, client_headers: Mapping[str, str]) -> dict[str, str]:
    headers = {name: client_headers[name] for name in _FORWARDED_HEADERS if name in client_headers}
    # identity: the stream's bytes reach the client exactly as the upstream wrote them.
    headers.update({"content-type": "application/json", "accept-encoding": "identity", "x-request-id": request_id.get()})
    headers.update(upstream.auth_headers(anthropic=api.anthropic))
    return headers


async def _send(upstream: Upstream, request: httpx.Request, metrics: Metrics) -> httpx.Response:
    started = time.perf_counter()
    try:
        response = await upstream.client.send(request, stream=True)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
        upstream.unreachable(f"{type(exc).__name__}: {exc}")
        metrics.upstream_requests.labels(upstream.model_id, "unreachable").inc()
        raise UpstreamUnreachableError(f"Upstream model {upstream.model_id!r} could not be reached.",
                                       retry_after_s=upstream.health.retry_after_s()) from None
    except httpx.TimeoutException:
        metrics.upstream_errors.labels(upstream.model_id, "timeout").inc()
        metrics.upstream_requests.labels(upstream.model_id, "timeout").inc()
        raise UpstreamTimeoutError(f"Upstream model {upstream.model_id!r} did not answer within {upstream.config.timeout_s:g}s.") from None
    except httpx.HTTPError as exc:
        upstream.unreachable(f"{type(exc).__name__}: {exc}")
        metrics.upstream_requests.labels(upstream.model_id, "unreachable").inc()
        raise UpstreamUnreachableError(f"Upstream model {upstream.model_id!r} failed: {type(exc).__name__}.",
                                       retry_after_s=upstream.health.retry_after_s()) from None
    metrics.upstream_latency.labels(upstream.model_id).observe(time.perf_counter() - started)
    metrics.upstream_requests.labels(upstream.model_id, str(response.status_code)).inc()
    return response


async def _error_of(upstream: Upstream, response: httpx.Response, metrics: Metrics) -> RouterError:
    """The upstream's error reply as a RouterError carrying its status, type, code and message."""
    try:
        data = b""
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > _MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass  # the status alone still says what happened
    finally:
        await response.aclose()
    if response.status_code >= 500:
        metrics.upstream_errors.labels(upstream.model_id, "status_5xx").inc()
    message, kind, code, param = _error_fields(data)
    error = RouterError(message or f"Upstream model {upstream.model_id!r} answered {response.status_code}.", param=param,
                        code=code, retry_after_s=_retry_after(response.headers.get("retry-after")))
    error.status = response.status_code
    error.type = kind or ("server_error" if response.status_code >= 500 else "invalid_request_error")
    return error


def _error_fields(data: bytes) -> tuple[str | None, str | None, str | None, str | None]:
    """message, type, code, param of an OpenAI (`{"error": {...}}`) or Anthropic (`{"type": "error", ...}`) body."""
    try:
        document = json.loads(data)
    except ValueError:
        text = data.decode(errors="replace").strip()
        return (text[:500] or None), None, None, None
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return None, None, None, None
    fields = [error.get(name) for name in ("message", "type", "code", "param")]
    return tuple(value if isinstance(value, str) else None for value in fields)  # type: ignore[return-value]


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def _relay(upstream: Upstream, response: httpx.Response, client_name: str, metrics: Metrics) -> AsyncIterator[bytes]:
    """The upstream's events as they arrive, renamed; a stream that breaks off ends with the API's error event."""
    frames = SseFrames(client_name)
    try:
        async for chunk in response.aiter_bytes():
            events = frames.feed(chunk)
            if events:
                yield events
        rest = frames.rest()
        if rest:
            yield rest
    except httpx.HTTPError as exc:
        metrics.upstream_errors.labels(upstream.model_id, "stream").inc()
        logger.warning("upstream %s: stream broke off: %s: %s", upstream.model_id, type(exc).__name__, exc)
        raise ModelUnavailableError(f"Upstream model {upstream.model_id!r} broke off the stream.", retry_after_s=1.0) from None
    finally:
        # Also on a client that went away: closing the response closes the upstream's stream.
        await response.aclose()
