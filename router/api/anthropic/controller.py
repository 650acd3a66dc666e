"""POST /v1/messages and /v1/messages/count_tokens (reference/api-conformance.md §3)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, post

from parsers import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart
from router.api.anthropic.input import to_chat_messages, to_turn_request
from router.api.dispatch import new_id, open_model, run_whole_turn
from router.api.fleet import route_to_fleet
from router.upstream.proxy import API_COUNT_TOKENS, API_MESSAGES
from router.api.services import pool_of, upstreams_of
from router.turn.messages import normalize_messages
from router.turn.template import render_chat
from router.turn.textgen import Generation
from router.errors import InvalidRequestError, RouterError, error_body
from router.api.anthropic.schemas import DeltaUsage, Message, MessagesBody, Usage
from router.api.decode import decode_body
from router.sse import event_frame, sse_response
from router.turn.turn import Heartbeat, Turn, TurnEnd, prepare_turn

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class MessagesController(Controller):
    path = "/v1/messages"

    @post(status_code=200)
    async def create(self, request: Request) -> object:
        pool, raw = pool_of(request), await request.body()
        if (reply := await route_to_fleet(request, raw, pool, upstreams_of(request), API_MESSAGES)) is not None:
            return reply
        body = decode_body(raw, MessagesBody)
        if body.max_tokens is None:
            raise InvalidRequestError("max_tokens: Field required", param="max_tokens")
        handle = await open_model(pool, body.model, wait=not body.stream)
        turn = await prepare_turn(handle, to_turn_request(body))
        if body.stream:
            return sse_response(_stream(turn, body.model), _error_frame)
        builder = BlockBuilder()
        end = await run_whole_turn(turn, builder.apply)
        return _message(turn, body.model, builder.finish(), end)

    @post("/count_tokens", status_code=200)
    async def count_tokens(self, request: Request) -> object:
        pool, raw = pool_of(request), await request.body()
        if (reply := await route_to_fleet(request, raw, pool, upstreams_of(request), API_COUNT_TOKENS)) is not None:
            return reply
        body = decode_body(raw, MessagesBody)
        handle = await open_model(pool, body.model, wait=False)  # the tokenizer is enough
        request_ = to_turn_request(body)
        prompt = await render_chat(handle, normalize_messages(to_chat_messages(body)), tools=request_.tools,
                                   request_kwargs=request_.template_kwargs)
        return {"input_tokens": len(prompt.tokens)}


def _usage(turn: Turn) -> Usage:
    generation = turn.generation
    return Usage(_uncached(generation), generation.completion_tokens, 0, generation.cached_tokens)


def _uncached(generation: Generation) -> int:
    """Anthropic's input_tokens leave out cache reads: the prompt is input + cache_read (+ cache_creation)."""
    return generation.prompt_tokens - generation.cached_tokens


def _stop(end: TurnEnd | None) -> tuple[str, str | None]:
    if end is None:
        return "end_turn", None
    if end.stop_sequence is not None:
        return "stop_sequence", end.stop_sequence
    return _STOP_REASONS.get(end.finish_reason, "end_turn"), None


def _message(turn: Turn, model: str, content: list[dict[str, Any]], end: TurnEnd | None) -> Message:
    stop_reason, stop_sequence = _stop(end)
    return Message(new_id("msg_"), "message", "assistant", model, content, stop_reason, stop_sequence, _usage(turn))


def signature_for(thinking: str) -> str:
    """An opaque, non-empty signature: clients require one and send it back unchanged."""
    return "rapidmlx-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


def tool_use_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_") if call_id.startswith("call_") else call_id


class BlockBuilder:
    """Turn events → content blocks, opening and closing blocks the way the stream does.

    ``apply`` returns the stream frames (as (event, payload) pairs) for each event, so the
    non-stream response and the SSE stream share one block state machine.
    """

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._ended: set[int] = set()  # tool_use blocks that got their ToolCallEnd
        self._pending_space = ""  # whitespace between blocks: held until real text follows

    def apply(self, event) -> list[tuple[str, dict[str, Any]]]:
        if isinstance(event, ReasoningDelta):
            return self._delta("thinking", {"type": "thinking_delta", "thinking": event.text}, event.text)
        if isinstance(event, ContentDelta):
            return self._text(event.text)
        if isinstance(event, ToolCallStart):
            self._pending_space = ""
            frames = self._close()
            block = {"type": "tool_use", "id": tool_use_id(event.id), "name": event.name, "input": {}}
            return frames + self._start(block, {**block, "input": {}}, arguments="")
        if isinstance(event, ToolCallArgsDelta) and self._open is not None and self._open["type"] == "tool_use":
            self._open["_arguments"] += event.text
            return [self._frame_delta({"type": "input_json_delta", "partial_json": event.text})]
        if isinstance(event, ToolCallEnd) and self._open is not None and self._open["type"] == "tool_use":
            self._open["input"] = event.arguments
            self._ended.add(len(self.blocks) - 1)
            return self._close()
        return []

    def finish(self) -> list[dict[str, Any]]:
        """The whole message's blocks. A tool_use that never got its end was cut off or
        malformed (its text follows as a text block): a client would run it with no input,
        so the whole message leaves it out. The stream cannot take back a block it opened."""
        self._close()
        return [b for i, b in enumerate(self.blocks) if b["type"] != "tool_use" or i in self._ended]

    def close_frames(self) -> list[tuple[str, dict[str, Any]]]:
        return self._close()

    # ------------------------------------------------------------------ internal

    def _text(self, text: str) -> list[tuple[str, dict[str, Any]]]:
        if self._open is None or self._open["type"] != "text":
            if not text.strip():
                self._pending_space += text
                return []
            text, self._pending_space = self._pending_space.lstrip("\n") + text, ""
        return self._delta("text", {"type": "text_delta", "text": text}, text)

    def _delta(self, kind: str, delta: dict[str, Any], text: str) -> list[tuple[str, dict[str, Any]]]:
        frames: list[tuple[str, dict[str, Any]]] = []
        if self._open is None or self._open["type"] != kind:
            frames += self._close()
            empty = {"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking" else {"type": "text", "text": ""}
            frames += self._start(dict(empty), dict(empty))
        self._open[kind] += text
        frames.append(self._frame_delta(delta))
        return frames

    def _start(self, block: dict[str, Any], wire: dict[str, Any], arguments: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        if arguments is not None:
            block["_arguments"] = arguments
        self._open = block
        self.blocks.append(block)
        return [("content_block_start", {"type": "content_block_start", "index": len(self.blocks) - 1, "content_block": wire})]

    def _frame_delta(self, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return ("content_block_delta", {"type": "content_block_delta", "index": len(self.blocks) - 1, "delta": delta})

    def _close(self) -> list[tuple[str, dict[str, Any]]]:
        block, self._open = self._open, None
        if block is None:
            return []
        frames = []
        if block["type"] == "thinking":
            block["signature"] = signature_for(block["thinking"])
            frames.append(self._frame_delta({"type": "signature_delta", "signature": block["signature"]}))
        block.pop("_arguments", None)
        frames.append(("content_block_stop", {"type": "content_block_stop", "index": len(self.blocks) - 1}))
        return frames


def _error_frame(error: RouterError) -> bytes:
    """The terminal event of a failed stream (no message_stop follows it)."""
    return event_frame("error", error_body(error, anthropic=True))


async def _stream(turn: Turn, model: str) -> AsyncIterator[bytes]:
    """§3.3: message_start, blocks (start, deltas, stop) in order, message_delta, message_stop."""
    start = Message(new_id("msg_"), "message", "assistant", model, [], None, None,
                    Usage(turn.prompt_tokens, 0, 0, 0))
    yield event_frame("message_start", {"type": "message_start", "message": start})
    builder = BlockBuilder()
    async for event in turn.events(streamed=True):
        if isinstance(event, Heartbeat):
            yield event_frame("ping", {"type": "ping"})
            continue
        for name, payload in builder.apply(event):
            yield event_frame(name, payload)
        if isinstance(event, TurnEnd):
            for name, payload in builder.close_frames():
                yield event_frame(name, payload)
            stop_reason, stop_sequence = _stop(event)
            usage = turn.generation
            yield event_frame("message_delta", {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                "usage": DeltaUsage(usage.completion_tokens, _uncached(usage), usage.cached_tokens),
            })
    yield event_frame("message_stop", {"type": "message_stop"})
