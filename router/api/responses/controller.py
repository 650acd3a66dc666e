"""POST /v1/responses (reference/api-conformance.md §2): items, usage and the full event stream."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, post

from router.api.dispatch import new_id, open_model, run_whole_turn
from router.api.fleet import route_to_fleet
from router.upstream.proxy import API_RESPONSES
from router.api.services import pool_of, responses_of, upstreams_of
from router.errors import ContextLengthError, InvalidRequestError, RouterError, shown
from router.api.responses.input import flat_tools, input_messages, to_turn_request
from router.api.responses.items import ItemBuilder
from router.api.responses.store import ResponseStore
from router.api.decode import decode_body
from router.api.responses.schemas import ResponsesBody
from router.sse import COMMENT_KEEPALIVE, event_frame, sse_response
from router.turn.turn import Heartbeat, Turn, TurnEnd, prepare_turn


class ResponsesController(Controller):
    path = "/v1/responses"

    @post(status_code=200)
    async def create(self, request: Request) -> object:
        pool, responses, raw = pool_of(request), responses_of(request), await request.body()
        if (reply := await route_to_fleet(request, raw, pool, upstreams_of(request), API_RESPONSES)) is not None:
            return reply
        body = decode_body(raw, ResponsesBody)
        history = _history(body, responses)
        handle = await open_model(pool, body.model, wait=not body.stream)
        turn_request = to_turn_request(body, history)
        shell = ResponseShell(body)
        try:
            turn = await prepare_turn(handle, turn_request)
        except ContextLengthError as exc:
            if not body.stream:
                raise
            stream = _ResponseStream(shell)
            return sse_response(stream.failed_at_once(exc), stream.failed)
        conversation = history + input_messages(body.input)
        if body.stream:
            stream = _ResponseStream(shell)
            return sse_response(stream.frames(turn, responses, conversation, body.store is not False), stream.failed)
        builder = ItemBuilder()
        end = await run_whole_turn(turn, builder.apply)
        result = shell.finished(builder.finish(), turn, end)
        if body.store is not False:
            responses.put(shell.id, conversation + builder.as_messages())
        return result


def _history(body: ResponsesBody, responses: ResponseStore) -> list[dict[str, Any]]:
    if body.previous_response_id is None:
        return []
    history = responses.get(body.previous_response_id)
    if history is None:
        raise InvalidRequestError(f"Previous response with id '{shown(body.previous_response_id)}' not found.", param="previous_response_id")
    return [dict(m) for m in history]


class ResponseShell:
    """The Response object around the output: the request's settings echoed back."""

    def __init__(self, body: ResponsesBody) -> None:
        self.id = new_id("resp_")
        self.created_at = int(time.time())
        self._body = body

    def render(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None, *,
               error: dict[str, Any] | None = None, incomplete: str | None = None) -> dict[str, Any]:
        body = self._body
        tools = [{"type": "function", "name": t["function"]["name"], "description": t["function"].get("description"),
                  "parameters": t["function"]["parameters"], "strict": False} for t in _flat(body)]
        return {
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status, "model": body.model,
            "output": output, "usage": usage, "error": error,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": body.instructions, "tools": tools, "tool_choice": _choice_echo(body.tool_choice),
            "parallel_tool_calls": body.parallel_tool_calls is not False, "temperature": body.temperature,
            "top_p": body.top_p, "max_output_tokens": body.max_output_tokens,
            "previous_response_id": body.previous_response_id, "reasoning": body.reasoning, "text": body.text,
            "store": body.store is not False, "metadata": body.metadata or {},
        }

    def finished(self, output: list[dict[str, Any]], turn: Turn, end: TurnEnd | None) -> dict[str, Any]:
        incomplete = end is not None and end.finish_reason == "length"
        return self.render("incomplete" if incomplete else "completed", output, usage_of(turn),
                           incomplete="max_output_tokens" if incomplete else None)


def _flat(body: ResponsesBody) -> list[dict[str, Any]]:
    return flat_tools(body.tools) or []


def _choice_echo(choice: str | dict[str, Any] | None) -> str | dict[str, Any]:
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "name": choice.get("name")}
    return choice if choice in ("none", "required") else "auto"


def usage_of(turn: Turn) -> dict[str, Any]:
    generation = turn.generation
    return {
        "input_tokens": generation.prompt_tokens,
        "input_tokens_details": {"cached_tokens": generation.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": generation.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens()},
        "total_tokens": generation.prompt_tokens + generation.completion_tokens,
    }


class _ResponseStream:
    """§2.3: created, in_progress, per-item events, then exactly one terminal event.

    Every event is numbered 0, 1, 2, ... across the stream (the SDK checks the order); the
    builder's items live here so that a failure can still report what was produced.
    """

    def __init__(self, shell: ResponseShell) -> None:
        self._shell = shell
        self._next = 0
        self._builder = ItemBuilder()

    async def frames(self, turn: Turn, responses: ResponseStore, conversation: list[dict[str, Any]], store: bool) -> AsyncIterator[bytes]:
        shell, builder = self._shell, self._builder
        yield self._frame("response.created", {"response": shell.render("in_progress", [])})
        yield self._frame("response.in_progress", {"response": shell.render("in_progress", [])})
        async for event in turn.events(streamed=True):
            if isinstance(event, Heartbeat):
                yield COMMENT_KEEPALIVE  # bytes through a long prefill; SSE parsers skip comments
                continue
            for kind, payload in builder.apply(event):
                yield self._frame(kind, payload)
            if isinstance(event, TurnEnd):
                for kind, payload in builder.close_frames():
                    yield self._frame(kind, payload)
                result = shell.finished(builder.items, turn, event)
                if store:
                    responses.put(shell.id, conversation + builder.as_messages())
                yield self._frame(f"response.{result['status']}", {"response": result})

    async def failed_at_once(self, error: ContextLengthError) -> AsyncIterator[bytes]:
        """A prompt over the context, streamed: Codex compacts on this code, so it must be the terminal event."""
        yield self._frame("response.created", {"response": self._shell.render("in_progress", [])})
        yield self.failed(error)

    def failed(self, error: RouterError) -> bytes:
        """The terminal ``response.failed`` event, with the items produced so far."""
        failed = self._shell.render("failed", self._builder.items, error={"code": error.code or "server_error", "message": error.message})
        return self._frame("response.failed", {"response": failed})

    def _frame(self, kind: str, payload: dict[str, Any]) -> bytes:
        frame = event_frame(kind, {"type": kind, "sequence_number": self._next, **payload})
        self._next += 1
        return frame
