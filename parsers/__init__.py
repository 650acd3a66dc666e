"""Model-output parsing: reasoning, content and tool calls, whole or streamed.

Public contract (DESIGN.md "Parsers"): ``parse_output``, ``stream_output``,
``detect_parsers`` (plus ``explain_detection``), and for the router the streaming
interface ``make_output_parser`` with its event types.  Pure Python: imports nothing
from ``router``, ``engines``, MLX or transformers.

Streaming use (one parser per request)::

    parser = make_output_parser(tool_parser="qwen3_coder", reasoning_parser="qwen3",
                                tools=request_tools, thinking_forced_open=True)
    for text in detokenized_deltas:
        for event in parser.feed(text):
            ...  # ReasoningDelta / ContentDelta / ToolCallStart / ToolCallArgsDelta / ToolCallEnd
    for event in parser.finish():
        ...
    if parser.truncated_call:
        ...  # finish_reason "length": an unfinished call came back as content

A ``ToolCallStart`` without a ``ToolCallEnd`` was abandoned (cut off or malformed); its
text follows as ``ContentDelta``.  Content and reasoning are trimmed at both ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import (
    ContentDelta,
    OutputParser,
    ParseEvent,
    ReasoningDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    dump_arguments,
)
from .detect import detect_parsers, explain_detection
from .pipeline import make_output_parser
from .registry import REASONING_PARSERS, TOOL_PARSERS, reasoning_parser_name, tool_parser_name

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "ContentDelta",
    "OutputParser",
    "ParseEvent",
    "ReasoningDelta",
    "ToolCallArgsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "detect_parsers",
    "dump_arguments",
    "events_to_result",
    "explain_detection",
    "make_output_parser",
    "parse_output",
    "reasoning_parser_name",
    "stream_output",
    "tool_parser_name",
]


def events_to_result(events: Iterable[ParseEvent]) -> dict[str, Any]:
    """Rebuild the whole-output dict from a stream of events.

    Calls that started but never ended (abandoned) are left out; their text arrived
    as content.

    Args:
        events: Events in emission order.

    Returns:
        ``{"content": str, "reasoning": str | None, "tool_calls": [...]}``.
    """
    content: list[str] = []
    reasoning: list[str] = []
    started: dict[int, ToolCallStart] = {}
    calls: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, ContentDelta):
            content.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, ToolCallStart):
            started[event.index] = event
        elif isinstance(event, ToolCallEnd) and event.index in started:
            start = started[event.index]
            calls.append({"id": start.id, "name": start.name, "arguments": event.arguments})
    return {
        "content": "".join(content),
        "reasoning": "".join(reasoning) if reasoning else None,
        "tool_calls": calls,
    }


def stream_output(chunks: Iterable[str], *, tool_parser: str | None, reasoning_parser: str | None = None,
                  tools: list[dict] | None = None, thinking_forced_open: bool = False) -> dict[str, Any]:
    """Parse output delivered in chunks, rebuilding the result only from the stream's events.

    Args:
        chunks: The output text in pieces (any grouping).
        tool_parser: Tool-call parser name or alias, or None.
        reasoning_parser: Reasoning parser name or alias, or None.
        tools: The request's tools, or None when none were sent.
        thinking_forced_open: The prompt ended inside an open think block.

    Returns:
        ``{"content": str, "reasoning": str | None, "tool_calls": [{"id", "name", "arguments"}]}``.

    Raises:
        ValueError: A parser name is unknown.
    """
    parser = make_output_parser(tool_parser=tool_parser, reasoning_parser=reasoning_parser, tools=tools,
                                thinking_forced_open=thinking_forced_open)
    events: list[ParseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    return events_to_result(events)


def parse_output(text: str, *, tool_parser: str | None, reasoning_parser: str | None = None,
                 tools: list[dict] | None = None, thinking_forced_open: bool = False) -> dict[str, Any]:
    """Parse a complete output into content, reasoning and tool calls.

    Same keywords and result as ``stream_output``; it is the one-chunk stream, so the
    two always agree.

    Raises:
        ValueError: A parser name is unknown.
    """
    return stream_output([text], tool_parser=tool_parser, reasoning_parser=reasoning_parser, tools=tools,
                         thinking_forced_open=thinking_forced_open)
