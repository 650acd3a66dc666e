"""Anthropic Messages bodies (reference/api-conformance.md §3).

Inbound content blocks stay plain dicts: Claude Code sends block types no spec lists, and an
unknown block must be skipped, never rejected.
"""

from __future__ import annotations

from typing import Any

import msgspec


class MessagesBody(msgspec.Struct):
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int | None = None  # required on /v1/messages, absent on count_tokens
    system: str | list[dict[str, Any]] | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None


class Usage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class DeltaUsage(msgspec.Struct):
    output_tokens: int
    input_tokens: int
    cache_read_input_tokens: int


class Message(msgspec.Struct):
    id: str
    type: str  # "message"
    role: str  # "assistant"
    model: str
    content: list[dict[str, Any]]
    stop_reason: str | None
    stop_sequence: str | None
    usage: Usage
