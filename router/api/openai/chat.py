"""POST /v1/chat/completions (reference/api-conformance.md §1.1–1.4)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, post
from msgspec import UNSET

from parsers import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, dump_arguments
from router.api.dispatch import new_id, now, open_model, run_whole_turn
from router.api.fleet import route_to_fleet
from router.upstream.proxy import API_CHAT
from router.api.services import pool_of, upstreams_of
from router.errors import InvalidRequestError, RouterError, error_body
from router.api.decode import decode_body
from router.turn.fields import kind_of, openai_path, opt_object, opt_str, req_object, req_str
from router.api.openai.schemas import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionBody,
    ChatCompletionChunk,
    ChatMessage,
    ChoiceLogprobs,
    ChunkChoice,
    ChunkDelta,
    CompletionTokensDetails,
    LogprobEntry,
    PromptTokensDetails,
    ToolCall,
    ToolCallFunction,
    TopLogprobEntry,
    Usage,
)
from router.sse import COMMENT_KEEPALIVE, DONE_FRAME, data_frame, sse_response
from router.turn.structured import chat_response_format
from router.turn.textgen import Generation, TokenInfo
from router.turn.sampling import normalize_stop, sampling_input
from router.turn.turn import Heartbeat, LogprobsDelta, ToolChoice, Turn, TurnEnd, TurnRequest, prepare_turn

logger = logging.getLogger(__name__)


class ChatCompletionsController(Controller):
    path = "/v1/chat/completions"

    @post(status_code=200)
    async def create(self, request: Request) -> object:
        pool, raw = pool_of(request), await request.body()
        if (reply := await route_to_fleet(request, raw, pool, upstreams_of(request), API_CHAT)) is not None:
            return reply
        body = decode_body(raw, ChatCompletionBody)
        if body.n not in (None, 1):
            raise InvalidRequestError("Only n=1 is supported.", param="n")
        handle = await open_model(pool, body.model, wait=not body.stream)
        turn = await prepare_turn(handle, to_turn_request(body))
        alias = pool.config.server.reasoning_alias
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return sse_response(_stream_chunks(turn, body.model, include_usage, alias), openai_error_frame)
        message = MessageBuilder(reasoning_alias=alias)
        await run_whole_turn(turn, message.apply)
        logprobs = _choice_logprobs(message.logprobs) if body.logprobs else None
        choice = ChatChoice(0, message.build(), logprobs, message.finish_reason)
        return ChatCompletion(new_id("chatcmpl-"), "chat.completion", now(), body.model, [choice], usage_of(turn.generation, turn.reasoning_tokens()))


def to_turn_request(body: ChatCompletionBody) -> TurnRequest:
    requested = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    kwargs = dict(body.chat_template_kwargs or {})
    if body.reasoning_effort is not None and "enable_thinking" not in kwargs:
        kwargs["enable_thinking"] = body.reasoning_effort not in ("none", "minimal")
    return TurnRequest(
        messages=body.messages,
        tools=_function_tools(body.tools),
        tool_choice=_tool_choice(body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls is not False,
        max_tokens=requested,
        max_tokens_param="max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens",
        sampling=sampling_input(body, (body.top_logprobs or 0) if body.logprobs else None),
        stop=normalize_stop(body.stop),
        stop_token_ids=list(body.stop_token_ids or []),
        template_kwargs=kwargs,
        output_format=chat_response_format(body.response_format, openai_path("response_format")),
    )


def _function_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Function tools (``type`` absent means function); other tool types are skipped."""
    root = openai_path("tools")
    return [t for i, t in enumerate(tools or []) if (kind_of(t, root / i) or "function") == "function"] or None


def _tool_choice(choice: str | dict[str, Any] | None) -> ToolChoice:
    if choice is None or choice == "auto":
        return ToolChoice()
    if choice in ("none", "required"):
        return ToolChoice(choice)
    at = openai_path("tool_choice")
    kind = kind_of(choice, at) if isinstance(choice, dict) else None
    if kind == "function":
        return ToolChoice("named", req_str(req_object(choice, "function", at), "name", at / "function"))
    if kind == "allowed_tools":
        # The mode sits in a nested "allowed_tools" object; older clients put it at the top.
        nested = opt_object(choice, "allowed_tools", at)
        mode = opt_str(choice, "mode", at) or (opt_str(nested, "mode", at / "allowed_tools") if nested else None)
        return ToolChoice("required" if mode == "required" else "auto")
    raise InvalidRequestError("tool_choice must be 'none', 'auto', 'required' or a named function.", param="tool_choice")


class MessageBuilder:
    """Collects a whole turn into one assistant message (the non-stream response)."""

    def __init__(self, *, reasoning_alias: bool = False) -> None:
        self._reasoning_alias = reasoning_alias
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self._started: dict[int, ToolCallStart] = {}
        # Only calls that ended: one that started but never ended was cut off or malformed,
        # the parser sent its text as content, and without its arguments no client can run it.
        self.calls: dict[int, ToolCall] = {}
        self.logprobs: list[TokenInfo] = []
        self.finish_reason = "stop"

    def apply(self, event) -> None:
        if isinstance(event, ContentDelta):
            self.content.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallStart):
            self._started[event.index] = event
        elif isinstance(event, ToolCallEnd) and event.index in self._started:
            start = self._started[event.index]
            _warn_if_not_offered(event, start.name)
            self.calls[event.index] = ToolCall(id=start.id, type="function", function=ToolCallFunction(
                arguments=dump_arguments(event.arguments), name=start.name))
        elif isinstance(event, LogprobsDelta):
            self.logprobs.extend(event.tokens)
        elif isinstance(event, TurnEnd):
            self.finish_reason = event.finish_reason

    def build(self) -> ChatMessage:
        content = "".join(self.content)
        calls = [self.calls[i] for i in sorted(self.calls)]
        message = ChatMessage(role="assistant", content=content if content.strip() or not calls else None)
        if calls:
            message.tool_calls = calls
        if self.reasoning:
            message.reasoning_content = "".join(self.reasoning)
            if self._reasoning_alias:
                message.reasoning = message.reasoning_content
        return message


def _warn_if_not_offered(event: ToolCallEnd, name: str) -> None:
    if not event.offered:
        logger.warning("model called %r, which the request did not offer", name)


def _chunk_delta(event, reasoning_alias: bool) -> ChunkDelta | None:
    """One turn event as a chat delta (§1.3): id, type and name only on a call's first delta."""
    if isinstance(event, ContentDelta) and event.text:
        return ChunkDelta(content=event.text)
    if isinstance(event, ReasoningDelta) and event.text:
        return ChunkDelta(reasoning_content=event.text, reasoning=event.text if reasoning_alias else UNSET)
    if isinstance(event, ToolCallStart):
        call = ToolCall(index=event.index, id=event.id, type="function", function=ToolCallFunction(arguments="", name=event.name))
        return ChunkDelta(tool_calls=[call])
    if isinstance(event, ToolCallArgsDelta) and event.text:
        return ChunkDelta(tool_calls=[ToolCall(index=event.index, function=ToolCallFunction(arguments=event.text))])
    return None


def openai_error_frame(error: RouterError) -> bytes:
    """The terminal frame of a failed chat or completions stream (no [DONE] follows it)."""
    return data_frame(error_body(error))


async def _stream_chunks(turn: Turn, model: str, include_usage: bool, reasoning_alias: bool) -> AsyncIterator[bytes]:
    """The §1.3 sequence: role chunk, deltas, finish chunk, optional usage chunk, [DONE]."""
    chunk_id, created = new_id("chatcmpl-"), now()
    usage_field = None if include_usage else UNSET

    def chunk(delta: ChunkDelta, finish: str | None = None, logprobs: list[TokenInfo] | None = None) -> bytes:
        choice = ChunkChoice(0, delta, _choice_logprobs(logprobs) if logprobs else None, finish)
        return data_frame(ChatCompletionChunk(chunk_id, "chat.completion.chunk", created, model, [choice], usage_field))

    names: dict[int, str] = {}  # call index -> name, for the not-offered warning at its end
    yield chunk(ChunkDelta(role="assistant", content=""))
    async for event in turn.events(streamed=True):
        if isinstance(event, ToolCallStart):
            names[event.index] = event.name
        elif isinstance(event, ToolCallEnd):
            _warn_if_not_offered(event, names.get(event.index, ""))
        if isinstance(event, Heartbeat):
            yield COMMENT_KEEPALIVE
        elif isinstance(event, LogprobsDelta):
            yield chunk(ChunkDelta(), logprobs=event.tokens)
        elif isinstance(event, TurnEnd):
            yield chunk(ChunkDelta(), event.finish_reason)
        elif (delta := _chunk_delta(event, reasoning_alias)) is not None:
            yield chunk(delta)
    if include_usage:
        usage = usage_of(turn.generation, turn.reasoning_tokens())
        yield data_frame(ChatCompletionChunk(chunk_id, "chat.completion.chunk", created, model, [], usage))
    yield DONE_FRAME


def usage_of(generation: Generation, reasoning_tokens: int = 0) -> Usage:
    return Usage(
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        total_tokens=generation.prompt_tokens + generation.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=generation.cached_tokens),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=reasoning_tokens),
    )


def _choice_logprobs(infos: list[TokenInfo]) -> ChoiceLogprobs:
    return ChoiceLogprobs(
        content=[
            LogprobEntry(
                info.token, info.logprob, list(info.token.encode()),
                [TopLogprobEntry(t.token, t.logprob, list(t.token.encode())) for t in info.top],
            )
            for info in infos
        ]
    )
