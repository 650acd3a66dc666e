"""Event types and the per-request parser protocol shared by every parser family.

Owns the streaming contract between parsers and the router: the five event types, the
``OutputParser`` protocol, the call record families hand to the engine, and the two
formatting rules every family obeys (argument JSON text, generated call ids).  Holds no
format logic.
"""

from __future__ import annotations

import json
import secrets
import string
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ContentDelta",
    "NotACallError",
    "OutputParser",
    "ParseEvent",
    "RawCall",
    "ReasoningDelta",
    "ToolCallArgsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "dump_arguments",
    "new_call_id",
]


@dataclass(frozen=True)
class ContentDelta:
    """User-visible answer text."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Thinking text; always emitted before the content of the same turn."""

    text: str


@dataclass(frozen=True)
class ToolCallStart:
    """A tool call begins; sent once per call, before any of its argument deltas."""

    index: int
    """Position of the call in this output (0, 1, 2...), distinct per call."""
    id: str
    """The model's own id (Kimi, Mistral) when it gave one, else ``call_`` + 24 alphanumerics
    (Mistral: 9 bare alphanumerics, the only id shape its templates accept back)."""
    name: str
    """The complete function name (never a partial name)."""


@dataclass(frozen=True)
class ToolCallArgsDelta:
    """A fragment of the call's arguments JSON.

    Concatenated over one call the fragments equal ``dump_arguments(end.arguments)``.
    """

    index: int
    text: str


@dataclass(frozen=True)
class ToolCallEnd:
    """A tool call is complete.

    A ``ToolCallStart`` that never gets its ``ToolCallEnd`` was abandoned (the output was
    truncated or turned out malformed); its raw text follows as ``ContentDelta``.
    """

    index: int
    arguments: dict
    """The typed arguments (``{}`` for a call without arguments)."""
    offered: bool
    """False when ``tools`` were given and the name is not among them."""


ParseEvent = ContentDelta | ReasoningDelta | ToolCallStart | ToolCallArgsDelta | ToolCallEnd


@runtime_checkable
class OutputParser(Protocol):
    """Streaming parser for one request's output text; create one per request."""

    def feed(self, text: str) -> list[ParseEvent]:
        """Consume the next piece of output (any chunking, down to one character)."""
        ...

    def finish(self) -> list[ParseEvent]:
        """Flush held-back text at the end of the output.

        An unterminated call whose arguments cannot be completed comes back as
        ``ContentDelta`` text and sets ``truncated_call``.
        """
        ...

    @property
    def truncated_call(self) -> bool:
        """True if ``finish()`` had to turn an incomplete call into content."""
        ...


@dataclass
class RawCall:
    """A complete call as a family parsed it, before numbering and id assignment."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


class NotACallError(ValueError):
    """The text after a start marker is not a tool call: it goes back to content."""


def dump_arguments(arguments: dict[str, Any]) -> str:
    """Serialise arguments the one way every event stream uses.

    Args:
        arguments: The typed argument dict.

    Returns:
        Compact JSON (no spaces after separators), non-ASCII characters unescaped.
    """
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_ALNUM = string.ascii_letters + string.digits


def new_call_id(length: int = 24, prefix: str = "call_") -> str:
    """Generate a tool-call id: ``prefix`` + ``length`` random alphanumerics.

    Args:
        length: Number of random characters.
        prefix: Text put in front (Mistral templates want 9 bare characters, no prefix).

    Returns:
        The new id.
    """
    return prefix + "".join(secrets.choice(_ALNUM) for _ in range(length))
