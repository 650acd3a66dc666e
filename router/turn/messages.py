"""Chat messages in OpenAI's shapes → what chat templates expect.

Messages arrive with content as a string or a list of parts and assistant tool calls with
JSON-string arguments; templates want string contents and argument dicts. Every shape
mistake is a 400 whose ``param`` is the JSON path of the offending value
(``messages[0].tool_calls[1].function.name``), read through ``router.turn.fields``.
"""

from __future__ import annotations

import json
from typing import Any

from router.turn.fields import JsonPath, as_object, expect, kind_of, openai_path, opt_list, opt_str, optional, req_object, req_str
from router.errors import InvalidRequestError, shown

_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# Text parts of every API's messages (chat, Responses input and output, refusals, reasoning).
_TEXT_PART_TYPES = {"text", "input_text", "output_text", "refusal", "summary_text", "reasoning_text"}
_MEDIA_PART_TYPES = {"image_url", "input_image", "image", "input_file", "file", "input_audio"}
# Message fields templates use as strings (concatenate, compare, print).
_STRING_FIELDS = ("name", "tool_call_id", "reasoning_content", "reasoning")


def normalize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate roles and flatten contents; raise InvalidRequestError naming the message."""
    if not messages:
        raise InvalidRequestError("'messages' must contain at least one message.", param="messages")
    root = openai_path("messages")
    return [_normalize_message(root / i, message) for i, message in enumerate(messages)]


def _normalize_message(at: JsonPath, message: Any) -> dict[str, Any]:
    message = as_object(message, at)
    role = opt_str(message, "role", at)
    if role not in _ROLES:
        raise InvalidRequestError(f"{at}.role must be one of {sorted(_ROLES)}, got {shown(repr(role))}.", param=f"{at}.role")
    for key in _STRING_FIELDS:
        opt_str(message, key, at)
    out = {k: v for k, v in message.items() if v is not None}
    out["role"] = {"developer": "system", "function": "tool"}.get(role, role)
    out["content"] = content_text(message.get("content"), at / "content")
    if role == "assistant" and "reasoning_content" not in out and message.get("reasoning") is not None:
        out["reasoning_content"] = message["reasoning"]  # vLLM's name for the same field
    calls = opt_list(message, "tool_calls", at)
    if calls:
        out["tool_calls"] = [_normalize_tool_call(call, at / "tool_calls" / j) for j, call in enumerate(calls)]
    return out


def content_text(content: Any, at: JsonPath, *, skip_unknown: bool = False) -> str:
    """A message content (string or list of parts) as one string.

    Args:
        content: The content as the client sent it.
        at: Its JSON path, for the 400 that names it.
        skip_unknown: Drop part types we do not know instead of rejecting them (Responses
            items carry more kinds than a text model can use).

    Raises:
        InvalidRequestError: Not a string or list, a part that is not an object or whose
            text is not a string, a media part (text models only), or an unknown part type
            when ``skip_unknown`` is false.
    """
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for j, part in enumerate(expect(content, at, str, list)):
        part = as_object(part, at / j)
        kind = kind_of(part, at / j)
        if kind in _TEXT_PART_TYPES:
            texts.append(opt_str(part, "text", at / j) or opt_str(part, "refusal", at / j) or "")
        elif kind in _MEDIA_PART_TYPES:
            raise InvalidRequestError("This model accepts text only.", param=(at / j).text)
        elif not skip_unknown:
            raise InvalidRequestError(f"Unsupported content part type {shown(repr(kind))}.", param=(at / j / "type").text)
    return "".join(texts)


def _normalize_tool_call(call: Any, at: JsonPath) -> dict[str, Any]:
    call = as_object(call, at)
    opt_str(call, "type", at)
    function = req_object(call, "function", at)
    return {
        "id": opt_str(call, "id", at),
        "type": "function",
        "function": {
            "name": req_str(function, "name", at / "function"),
            "arguments": _parse_arguments(optional(function, "arguments", at / "function", str, dict)),
        },
    }


def _parse_arguments(arguments: str | dict[str, Any] | None) -> str | dict[str, Any]:
    """Templates want argument dicts; clients send JSON strings."""
    if arguments is None or isinstance(arguments, dict):
        return arguments or {}
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; RecursionError: absurd nesting
        return arguments
    # Not a JSON object (unparsable, or a bare list or number): templates render a string
    # argument verbatim, the faithful choice, where they would call .items() on a dict.
    return parsed if isinstance(parsed, dict) else arguments

