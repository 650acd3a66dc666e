"""Assembles the per-request ``OutputParser``: reasoning splitter -> tool-call stream.

Text flows one way: the reasoning parser (if any) takes the raw output and passes the
content part on to the tool-call stream (if any), and both write events into one shared
``EventSink``.  Channel protocols that interleave the two (gpt-oss harmony) implement
the whole stream themselves (``whole_stream = True``).
"""

from __future__ import annotations

from .base import ParseEvent, new_call_id
from .registry import load_reasoning_parser, load_tool_parser
from .schema import ToolSet
from .sink import EventSink

__all__ = ["Pipeline", "make_output_parser"]


class Pipeline:
    """The ``OutputParser`` for one request."""

    def __init__(self, sink: EventSink, tool_stream, reasoning_cls, *, forced_open: bool) -> None:
        self._sink = sink
        self._tools = tool_stream
        self._reasoning = None
        if reasoning_cls is not None:
            tool_cls = type(tool_stream) if tool_stream is not None else None
            exits = tool_cls.reasoning_exit_markers if tool_cls is not None else ()
            calls = tool_cls.start_markers if tool_cls is not None else ()
            out = tool_stream.feed if tool_stream is not None else sink.content
            self._reasoning = reasoning_cls(sink, out, forced_open=forced_open, exit_markers=exits,
                                            call_markers=calls)

    def feed(self, text: str) -> list[ParseEvent]:
        """Consume a chunk of output; return the events it completes."""
        if text:
            if self._reasoning is not None:
                self._reasoning.feed(text)
            elif self._tools is not None:
                self._tools.feed(text)
            else:
                self._sink.content(text)
        return self._sink.drain()

    def finish(self) -> list[ParseEvent]:
        """End of output: flush held text and incomplete calls."""
        if self._reasoning is not None:
            self._reasoning.finish()
        if self._tools is not None:
            self._tools.finish()
        self._sink.abandon()
        return self._sink.drain()

    @property
    def truncated_call(self) -> bool:
        """True if ``finish()`` turned an incomplete call into content."""
        return self._sink.truncated_call


def make_output_parser(*, tool_parser: str | None, reasoning_parser: str | None = None,
                        tools: list[dict] | None = None, thinking_forced_open: bool = False):
    """Create the streaming parser for one request: the entry point of the streaming contract.

    Args:
        tool_parser: Tool-call parser name or alias (``"auto"`` sniffs); None for none.
        reasoning_parser: Reasoning parser name or alias; None for none.
        tools: The request's tools (OpenAI ``{"type": "function", "function": {...}}``
            entries or bare ``{"name", "parameters"}``); None when none were sent.
        thinking_forced_open: The rendered prompt ends inside an open think block.

    Returns:
        An ``OutputParser`` (``feed``, ``finish``, ``truncated_call``).

    Raises:
        ValueError: A parser name is unknown.
    """
    tool_cls = load_tool_parser(tool_parser) if tool_parser else None
    reasoning_cls = load_reasoning_parser(reasoning_parser) if reasoning_parser else None
    make_id = getattr(tool_cls, "make_call_id", None) or new_call_id
    sink = EventSink(ToolSet(tools), make_id)
    for cls in (tool_cls, reasoning_cls):
        if getattr(cls, "whole_stream", False):
            return cls(sink, parse_tools=getattr(tool_cls, "whole_stream", False))
    tool_stream = tool_cls(sink) if tool_cls is not None else None
    return Pipeline(sink, tool_stream, reasoning_cls, forced_open=thinking_forced_open)
