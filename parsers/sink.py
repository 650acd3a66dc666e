"""Collects one request's events: numbers and names calls, trims text at its edges.

Every family writes through an ``EventSink``, so index and id rules, the ``offered``
flag and whitespace trimming live in one place.  Content and reasoning are each
emitted with their leading and trailing whitespace removed (held back until more
non-space text arrives), so the rebuilt strings equal ``"".join(pieces).strip()``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .base import (
    ContentDelta,
    ParseEvent,
    RawCall,
    ReasoningDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    dump_arguments,
    new_call_id,
)
from .schema import ToolSet

logger = logging.getLogger(__name__)

__all__ = ["EventSink"]


class _EdgeTrimmer:
    """Emits text minus leading/trailing whitespace, holding trailing spaces back."""

    def __init__(self, events: list[ParseEvent], kind: type) -> None:
        self._events = events
        self._kind = kind
        self._started = False
        self._pending = ""

    def push(self, text: str) -> None:
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        core = text.rstrip()
        if core:
            self._events.append(self._kind(self._pending + core))
            self._pending = text[len(core) :]
        else:
            self._pending += text


class EventSink:
    """Event buffer for one request, shared by the reasoning splitter and tool parsers."""

    def __init__(self, tools: ToolSet, make_id: Callable[[], str] = new_call_id) -> None:
        """Create an empty sink.

        Args:
            tools: The request's offered tools (for the ``offered`` flag and typing).
            make_id: Generator for ids when the model gives none.
        """
        self.tools = tools
        self.events: list[ParseEvent] = []
        self.truncated_call = False
        self.calls_started = 0
        self._make_id = make_id
        self._ids: set[str] = set()
        self._open: int | None = None
        self._open_name = ""
        self._content = _EdgeTrimmer(self.events, ContentDelta)
        self._reasoning = _EdgeTrimmer(self.events, ReasoningDelta)

    # -- text ----------------------------------------------------------------------

    def content(self, text: str) -> None:
        """Add answer text."""
        if text:
            self._content.push(text)

    def reasoning(self, text: str) -> None:
        """Add thinking text."""
        if text:
            self._reasoning.push(text)

    # -- calls -----------------------------------------------------------------------

    @property
    def in_call(self) -> bool:
        """True between a ``start`` and its ``end`` or ``abandon``."""
        return self._open is not None

    def start(self, name: str, native_id: str | None = None) -> None:
        """Open a call whose arguments will follow as ``args`` fragments.

        Args:
            name: The complete function name.
            native_id: The model's own id, kept verbatim unless already used.
        """
        if self._open is not None:
            self.abandon()
        call_id = native_id if native_id and native_id not in self._ids else None
        while call_id is None or call_id in self._ids:
            call_id = self._make_id()
        self._ids.add(call_id)
        self._open, self._open_name = self.calls_started, name
        self.calls_started += 1
        self.events.append(ToolCallStart(self._open, call_id, name))

    def args(self, text: str) -> None:
        """Add a fragment of the open call's compact arguments JSON."""
        if text and self._open is not None:
            self.events.append(ToolCallArgsDelta(self._open, text))

    def end(self, arguments: dict[str, Any]) -> None:
        """Close the open call with its final typed arguments."""
        if self._open is None:
            return
        offered = self.tools.offered(self._open_name)
        if not offered:
            logger.debug("model called a tool that was not offered: %s", self._open_name)
        self.events.append(ToolCallEnd(self._open, arguments, offered))
        self._open = None

    def abandon(self) -> None:
        """Drop the open call: it gets no ``ToolCallEnd`` (its text becomes content)."""
        self._open = None

    def call(self, call: RawCall) -> None:
        """Emit a complete call in one go: start, the whole arguments JSON, end."""
        self.start(call.name, call.id)
        self.args(dump_arguments(call.arguments))
        self.end(call.arguments)

    def drain(self) -> list[ParseEvent]:
        """Return and clear the buffered events."""
        out = self.events[:]
        self.events.clear()
        return out
