"""One assistant turn, API-neutral: render → generate → parse into reasoning, text and tool calls.

Every chat-style API (OpenAI chat, OpenAI Responses, Anthropic Messages) normalises its
request into a ``TurnRequest`` and turns ``Turn.events()`` into its own frames, so
templates, limits, tool choice and parsing behave the same on all of them.
"""

from __future__ import annotations

import logging

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from parsers import ContentDelta, ParseEvent, ReasoningDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, make_output_parser
from router.turn.messages import normalize_messages
from router.turn.template import RenderedPrompt, render_chat
from router.turn.fields import JsonPath, as_object, openai_path, opt_bool, opt_object, opt_str, req_object, req_str
from router.errors import InvalidRequestError, shown
from router.pool import ModelHandle
from router.turn.structured import OutputFormat, thinking_state
from router.turn.textgen import Generation, GenerationRequest, TokenInfo
from router.turn.sampling import SamplingInput, build_sampling, resolve_max_tokens, stop_token_ids

logger = logging.getLogger(__name__)

ToolChoiceMode = Literal["auto", "none", "required", "named"]


@dataclass(frozen=True)
class ToolChoice:
    mode: ToolChoiceMode = "auto"
    name: str | None = None  # the function a "named" choice requires


@dataclass
class TurnRequest:
    """What every chat-style API asks of the engine, in OpenAI chat's vocabulary."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None  # OpenAI function-tool shape
    tool_choice: ToolChoice = ToolChoice()
    parallel_tool_calls: bool = True
    max_tokens: int | None = None
    max_tokens_param: str = "max_tokens"
    sampling: SamplingInput = SamplingInput()
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    messages_param: str = "messages"
    output_format: OutputFormat | None = None  # response_format / text.format: constrained decoding


@dataclass(frozen=True)
class TurnEnd:
    """Last event of a turn."""

    finish_reason: str  # "stop" | "length" | "tool_calls"
    stop_sequence: str | None = None


@dataclass(frozen=True)
class Heartbeat:
    """Nothing new yet (a long prefill): streams send a keepalive, whole responses ignore it."""


@dataclass(frozen=True)
class LogprobsDelta:
    """Token log-probabilities that arrived with the text just emitted."""

    tokens: list[TokenInfo]


TurnEvent = ParseEvent | LogprobsDelta | Heartbeat | TurnEnd


class SentCalls:
    """Whether the call last sent to a client is still open (it ends, or text follows it: the
    parser sends an abandoned call's text as content). At the end of a truncated output, an
    open one was cut off mid-arguments, and the parser's finish replays its raw text as content."""

    def __init__(self) -> None:
        self._open: int | None = None

    def saw(self, event: ParseEvent) -> None:
        """An event the client was sent."""
        if isinstance(event, ToolCallStart):
            self._open = event.index
        elif isinstance(event, (ToolCallEnd, ContentDelta)):
            self._open = None

    def without_cut_call_text(self, finish_events: list[ParseEvent]) -> list[ParseEvent]:
        """``finish()``'s events of a truncated output, minus the replay of a call the client has."""
        if self._open is None:
            return finish_events
        return [event for event in finish_events if not isinstance(event, ContentDelta)]


class Turn:
    """A prepared turn; iterate ``events()`` once, then read the counters."""

    def __init__(self, generation: Generation, prompt: RenderedPrompt, request: TurnRequest) -> None:
        self.generation = generation
        self.prompt = prompt
        self._request = request
        self._handle = generation.handle
        self.reasoning_text: list[str] = []
        self.tool_calls = 0
        self._sent_calls = SentCalls()

    @property
    def prompt_tokens(self) -> int:
        return self.generation.prompt_tokens

    def reasoning_tokens(self) -> int:
        """Tokens spent thinking (re-tokenised from the reasoning text: parsers work on text)."""
        text = "".join(self.reasoning_text)
        return len(self._handle.tokenizer.encode(text, add_special_tokens=False)) if text else 0

    async def events(self, *, streamed: bool = False) -> AsyncIterator[TurnEvent]:
        """The turn's events. ``streamed``: for a client that gets them as they come — a call cut
        off by max_tokens reached it as the call's fragments, so the call's raw text that a whole
        response gets as content in its place is not sent again (finish_reason "length" says why
        the call is incomplete, as OpenAI's and vLLM's streams do)."""
        parser = self._make_parser()
        limit = None if self._request.parallel_tool_calls else 1
        muted: set[int] = set()  # calls past the parallel_tool_calls=false limit
        output: list[str] | None = [] if self._handle.log_content else None
        async for delta in self.generation.stream():
            if not (delta.text or delta.logprobs or delta.finish_reason):
                yield Heartbeat()
                continue
            if output is not None:
                output.append(delta.text)
            for event in parser.feed(delta.text) if parser else [ContentDelta(delta.text)] if delta.text else []:
                if (out := self._admit(event, limit, muted)) is not None:
                    yield out
            if delta.logprobs:
                yield LogprobsDelta(delta.logprobs)
        last = parser.finish() if parser else []
        if streamed and parser is not None and parser.truncated_call:
            last = self._sent_calls.without_cut_call_text(last)
        for event in last:
            if (out := self._admit(event, limit, muted)) is not None:
                yield out
        end = self._end(parser)
        self._log(end, output)
        yield end

    def _log(self, end: TurnEnd, output: list[str] | None) -> None:
        """One line per turn: counts only, unless ``[server] log_content`` asks for the text too."""
        generation = self.generation
        logger.info("%s: %d prompt tokens (%d cached), %d generated, finish %s", self._handle.model_id,
                    generation.prompt_tokens, generation.cached_tokens, generation.completion_tokens, end.finish_reason)
        if output is not None:
            logger.info("%s: prompt %r", self._handle.model_id, self.prompt.text)
            logger.info("%s: output %r", self._handle.model_id, "".join(output))

    def _admit(self, event: ParseEvent, limit: int | None, muted: set[int]) -> ParseEvent | None:
        if isinstance(event, ReasoningDelta):
            self.reasoning_text.append(event.text)
        if isinstance(event, (ToolCallStart, ToolCallArgsDelta, ToolCallEnd)):
            if isinstance(event, ToolCallStart) and limit is not None and self.tool_calls >= limit:
                muted.add(event.index)
            if event.index in muted:
                return None
            if isinstance(event, ToolCallStart):
                self.tool_calls += 1
        self._sent_calls.saw(event)
        return event

    def _end(self, parser) -> TurnEnd:
        reason = self.generation.finish_reason or "stop"
        if parser is not None and parser.truncated_call:
            reason = "length"
        elif self.tool_calls and reason == "stop":
            reason = "tool_calls"
        return TurnEnd(reason, self.generation.stop_sequence)

    def _make_parser(self):
        handle, request = self._handle, self._request
        tool_parser = handle.tool_parser if request.tool_choice.mode != "none" else None
        if tool_parser is None and handle.reasoning_parser is None:
            return None
        return make_output_parser(
            tool_parser=tool_parser,
            reasoning_parser=handle.reasoning_parser,
            tools=request.tools,
            thinking_forced_open=handle.prompt_opens_thinking(self.prompt.text),
        )


async def prepare_turn(handle: ModelHandle, request: TurnRequest) -> Turn:
    """Validate, render and tokenise; raise the API's 400s before any streaming starts."""
    messages = normalize_messages(request.messages)
    tools = _validated_tools(request)
    messages = _with_tool_choice_instruction(messages, request.tool_choice)
    prompt = await render_chat(handle, messages, tools=tools, request_kwargs=request.template_kwargs)
    max_tokens = resolve_max_tokens(handle, request.max_tokens, len(prompt.tokens), param=request.max_tokens_param, context_param=request.messages_param)
    sampling = build_sampling(handle, request.sampling)
    stops = stop_token_ids(handle, request.stop_token_ids)
    grammar = _grammar(handle, request, tools, prompt.text)
    generation = Generation(handle, GenerationRequest(prompt.tokens, max_tokens, sampling, request.stop, stops, prompt.boundaries,
                                                      grammar))
    return Turn(generation, prompt, request)


def _grammar(handle: ModelHandle, request: TurnRequest, tools: list[dict[str, Any]] | None, prompt_text: str) -> str:
    """What the output must follow: the response format, else the required tool call, else with a
    ``strict`` tool the calls the model opens ("": free); from the model's grammar cache when an
    earlier request built the same."""
    thinking = thinking_state(prompt_text, handle.reasoning_parser)
    options = {"tokenizer": handle.tokenizer, "reasoning_parser": handle.reasoning_parser, "thinking": thinking}
    if request.output_format is not None:
        return handle.grammars.output_grammar(request.output_format, **options)
    choice = request.tool_choice
    strict = choice.mode == "auto" and any(tool["function"].get("strict") for tool in tools or [])
    if not tools or not (strict or choice.mode in ("required", "named")):
        return ""
    built = handle.grammars.tool_grammar(tools, mode="lazy" if strict else "required", tool_parser=handle.tool_parser,
                                         named=choice.name if choice.mode == "named" else None,
                                         parallel=request.parallel_tool_calls, **options)
    if built.problem:  # the prompt's instruction alone, as before: a tool schema is no reason to refuse the request
        logger.warning("%s: tool_choice %s unconstrained: %s", handle.model_id, choice.mode, built.problem)
    return built.grammar


def _validated_tools(request: TurnRequest) -> list[dict[str, Any]] | None:
    """Function tools in OpenAI's shape, whose fields the template and parsers can use as they are.

    Responses and Anthropic tools are checked in their own paths as they are translated;
    this is where chat's are checked, and the backstop for all of them.
    """
    names = []
    root = openai_path("tools")
    for i, tool in enumerate(request.tools or []):
        names.append(_function_name(as_object(tool, root / i), root / i))
    choice = request.tool_choice
    if choice.mode in ("required", "named") and not names:
        raise InvalidRequestError(f"tool_choice {choice.mode!r} needs at least one tool.", param="tool_choice")
    if choice.mode == "named" and choice.name not in names:
        raise InvalidRequestError(f"tool_choice names {shown(repr(choice.name))}, which is not among the tools.", param="tool_choice")
    return request.tools or None


def _function_name(tool: dict[str, Any], at: JsonPath) -> str:
    function = req_object(tool, "function", at)
    at = at / "function"
    name = req_str(function, "name", at)
    if not name:
        raise InvalidRequestError(f"{at}.name must not be empty.", param=f"{at}.name")
    opt_str(function, "description", at)
    opt_object(function, "parameters", at)  # a JSON schema: templates and parsers read it as an object
    opt_bool(function, "strict", at)
    return name


def _with_tool_choice_instruction(messages: list[dict[str, Any]], choice: ToolChoice) -> list[dict[str, Any]]:
    """Prompting stands in for constrained decoding: tell the model which call is required."""
    if choice.mode == "required":
        note = "You must call at least one of the provided tools in your reply."
    elif choice.mode == "named":
        note = f"You must call the tool `{choice.name}` in your reply."
    else:
        return messages
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]
