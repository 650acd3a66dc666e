"""Shared tool definitions and the case constructor used by every family case list (cases/*.py)."""

from __future__ import annotations

from typing import Any

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["C", "F"]},
                "days": {"type": ["integer", "null"]},
            },
            "required": ["city"],
        },
    },
}
WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
SEARCH = {  # the bare {"name", "parameters"} form is accepted too
    "name": "search",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "exact": {"type": "boolean"},
            "ratio": {"type": "number"},
            "filters": {"type": "object"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    },
}
GET_TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}

TOOLS = [WEATHER, WRITE_FILE, SEARCH, GET_TIME]


def call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None,
         offered: bool = True) -> dict[str, Any]:
    """An expected call; ``id`` only for native ids (others must be generated)."""
    return {"name": name, "arguments": arguments or {}, "id": id, "offered": offered}


def case(id: str, text: str, *, parser: str | None, content: str = "", calls: tuple | list = (),
         reasoning: str | None = None, reasoning_parser: str | None = None, tools: list | None = TOOLS,
         forced: bool = False, truncated: bool = False) -> dict[str, Any]:
    """One test case: the output text and the parse it must produce, whole or streamed."""
    return {
        "id": id, "text": text, "parser": parser, "reasoning_parser": reasoning_parser, "tools": tools,
        "forced": forced, "content": content, "reasoning": reasoning, "calls": list(calls),
        "truncated": truncated,
    }
