"""OpenAI Responses bodies (reference/api-conformance.md §2). Items stay dicts: Codex sends
item and tool types that a closed union would reject."""

from __future__ import annotations

from typing import Any

import msgspec


class ResponsesBody(msgspec.Struct):
    model: str
    input: str | list[dict[str, Any]] = ""
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    stream: bool = False
    metadata: dict[str, str] | None = None
