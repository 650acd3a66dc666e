"""Anthropic Messages request → TurnRequest: blocks to chat messages, tools, choices, thinking."""

from __future__ import annotations

from typing import Any

from router.errors import InvalidRequestError
from router.api.anthropic.schemas import MessagesBody
from router.turn.sampling import SamplingInput, normalize_stop
from router.turn.turn import ToolChoice, TurnRequest

# Server-side tools Anthropic runs itself (web search, code execution...); a local model cannot.
_CLIENT_TOOL_TYPES = {None, "custom"}


def to_turn_request(body: MessagesBody) -> TurnRequest:
    if body.temperature is not None and not 0 <= body.temperature <= 1:
        raise InvalidRequestError("temperature: must be between 0 and 1.", param="temperature")
    choice, parallel = _tool_choice(body.tool_choice)
    return TurnRequest(
        messages=to_chat_messages(body),
        tools=_tools(body.tools),
        tool_choice=choice,
        parallel_tool_calls=parallel,
        max_tokens=body.max_tokens,
        sampling=SamplingInput(temperature=body.temperature, top_p=body.top_p, top_k=body.top_k),
        stop=normalize_stop(body.stop_sequences),
        template_kwargs=_thinking_kwargs(body.thinking),
    )


def to_chat_messages(body: MessagesBody) -> list[dict[str, Any]]:
    """System (top-level and inline ``role: system`` turns) first, then the turns in order."""
    system_parts = [_text_of(body.system, "system")] if body.system else []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(body.messages):
        if not isinstance(message, dict):
            raise InvalidRequestError(f"messages.{i}: must be an object.", param=f"messages.{i}")
        role = message.get("role")
        if role == "system":  # Claude Code sends these inside messages; fold them into the system prompt
            system_parts.append(_text_of(message.get("content"), f"messages.{i}.content"))
        elif role == "user":
            turns.extend(_user_turns(message.get("content"), i))
        elif role == "assistant":
            turns.append(_assistant_turn(message.get("content"), i))
        else:
            raise InvalidRequestError(f"messages.{i}.role: must be 'user' or 'assistant', got {role!r}.", param=f"messages.{i}.role")
    merged = _merge_same_role(turns)
    system = "\n\n".join(p for p in system_parts if p)
    return ([{"role": "system", "content": system}] if system else []) + merged


def _text_of(content: Any, param: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidRequestError(f"{param}: must be a string or a list of blocks.", param=param)
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text")


def _blocks(content: Any, param: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequestError(f"{param}: must be a string or a list of content blocks.", param=param)
    return [b for b in content if isinstance(b, dict)]


def _user_turns(content: Any, index: int) -> list[dict[str, Any]]:
    """Tool results become tool messages (before the turn's text, as the API orders them)."""
    tool_messages, texts = [], []
    for j, block in enumerate(_blocks(content, f"messages.{index}.content")):
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_result":
            result = _text_of(block.get("content"), f"messages.{index}.content.{j}.content")
            if block.get("is_error"):
                result = f"Error: {result}"
            tool_messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": result})
        elif kind in ("image", "document"):
            raise InvalidRequestError(f"messages.{index}.content.{j}: this model does not accept {kind} input.", param=f"messages.{index}.content.{j}")
        # Other block types (search_result, tool_reference, ...) carry nothing a text model can use.
    return tool_messages + ([{"role": "user", "content": "\n".join(texts)}] if texts else [])


def _assistant_turn(content: Any, index: int) -> dict[str, Any]:
    texts, thinking, calls = [], [], []
    for block in _blocks(content, f"messages.{index}.content"):
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "thinking":
            thinking.append(block.get("thinking", ""))
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "type": "function", "function": {"name": block.get("name", ""), "arguments": block.get("input") or {}}})
    turn: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if thinking:
        turn["reasoning_content"] = "\n".join(thinking)
    if calls:
        turn["tool_calls"] = calls
    return turn


def _merge_same_role(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for turn in turns:
        previous = merged[-1] if merged else None
        if previous and turn["role"] == previous["role"] and turn["role"] in ("user", "assistant") and not previous.get("tool_calls"):
            previous["content"] = "\n\n".join(t for t in (previous["content"], turn["content"]) if t)
            for key in ("tool_calls", "reasoning_content"):
                if key in turn:
                    previous[key] = turn[key]
        else:
            merged.append(dict(turn))
    return merged


def _tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    out = []
    for i, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or tool.get("type") not in _CLIENT_TOOL_TYPES or tool.get("defer_loading"):
            continue  # server tools and deferred tools never reach the prompt
        if not isinstance(tool.get("name"), str):
            raise InvalidRequestError(f"tools.{i}.name: Field required", param=f"tools.{i}.name")
        function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: dict[str, Any] | None) -> tuple[ToolChoice, bool]:
    if not choice:
        return ToolChoice(), True
    parallel = not choice.get("disable_parallel_tool_use", False)
    kind = choice.get("type")
    if kind == "auto":
        return ToolChoice("auto"), parallel
    if kind == "any":
        return ToolChoice("required"), parallel
    if kind == "none":
        return ToolChoice("none"), parallel
    if kind == "tool" and isinstance(choice.get("name"), str):
        return ToolChoice("named", choice["name"]), parallel
    raise InvalidRequestError("tool_choice.type: must be one of 'auto', 'any', 'tool' or 'none'.", param="tool_choice")


def _thinking_kwargs(thinking: dict[str, Any] | None) -> dict[str, Any]:
    """Map Anthropic's thinking switch onto the chat template's ``enable_thinking``."""
    if not thinking:
        return {}
    kind = thinking.get("type")
    if kind == "disabled":
        return {"enable_thinking": False}
    if kind in ("enabled", "adaptive"):
        return {"enable_thinking": True}
    raise InvalidRequestError("thinking.type: must be 'enabled', 'disabled' or 'adaptive'.", param="thinking")
