"""Chat messages in OpenAI's shapes → what chat templates expect.

Messages arrive with content as a string or a list of parts and assistant tool calls with
JSON-string arguments; templates want string contents and argument dicts. Every shape
mistake is a 400 naming the message it is in.
"""

from __future__ import annotations

import json
from typing import Any

from router.errors import InvalidRequestError

_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# Text parts of every API's messages (chat, Responses input and output, refusals, reasoning).
_TEXT_PART_TYPES = {"text", "input_text", "output_text", "refusal", "summary_text", "reasoning_text"}
_MEDIA_PART_TYPES = {"image_url", "input_image", "image", "input_file", "file", "input_audio"}


def normalize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate roles and flatten contents; raise InvalidRequestError naming the message."""
    if not messages:
        raise InvalidRequestError("'messages' must contain at least one message.", param="messages")
    return [_normalize_message(i, message) for i, message in enumerate(messages)]


def _normalize_message(index: int, message: Any) -> dict[str, Any]:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequestError(f"{param} must be an object.", param=param)
    role = message.get("role")
    if role not in _ROLES:
        raise InvalidRequestError(f"{param}.role must be one of {sorted(_ROLES)}, got {role!r}.", param=f"{param}.role")
    out = {k: v for k, v in message.items() if v is not None}
    out["role"] = {"developer": "system", "function": "tool"}.get(role, role)
    out["content"] = content_text(message.get("content"), f"{param}.content")
    if role == "assistant" and "reasoning_content" not in out and isinstance(message.get("reasoning"), str):
        out["reasoning_content"] = message["reasoning"]  # vLLM's name for the same field
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = [_normalize_tool_call(call, f"{param}.tool_calls[{j}]") for j, call in enumerate(message["tool_calls"])]
    return out


def content_text(content: Any, param: str, *, skip_unknown: bool = False) -> str:
    """A message content (string or list of parts) as one string.

    Args:
        content: The content as the client sent it.
        param: Its JSON path, for the 400 that names it.
        skip_unknown: Drop part types we do not know instead of rejecting them (Responses
            items carry more kinds than a text model can use).

    Raises:
        InvalidRequestError: Not a string or list, a media part (text models only), or an
            unknown part type when ``skip_unknown`` is false.
    """
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidRequestError(f"{param} must be a string or a list of content parts.", param=param)
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PART_TYPES:
            texts.append(str(part.get("text") or part.get("refusal") or ""))
        elif kind in _MEDIA_PART_TYPES:
            raise InvalidRequestError("This model accepts text only.", param=f"{param}[{j}]")
        elif not skip_unknown:
            raise InvalidRequestError(f"Unsupported content part type {kind!r}.", param=f"{param}[{j}].type")
    return "".join(texts)


def _normalize_tool_call(call: Any, param: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidRequestError(f"{param}.function.name is required.", param=f"{param}.function.name")
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": function["name"], "arguments": _parse_arguments(function.get("arguments"))},
    }


def _parse_arguments(arguments: Any) -> Any:
    """Templates want argument dicts; clients send JSON strings."""
    if not isinstance(arguments, str):
        return arguments or {}
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        # Not JSON: templates render a string argument verbatim, the faithful choice.
        return arguments
