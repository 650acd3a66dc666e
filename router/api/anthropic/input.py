"""Anthropic Messages request → TurnRequest: blocks to chat messages, tools, choices, thinking.

Block and tool types we do not know are skipped; a field we read holding the wrong JSON
type is a 400 naming its path in Anthropic's spelling (``messages.0.content.1.text``).
"""

from __future__ import annotations

from typing import Any

from router.turn.structured import anthropic_output_format
from router.turn.fields import (
    JsonPath, anthropic_path, as_object, expect, kind_of, opt_bool, opt_int, opt_object, opt_str, req_str,
)
from router.errors import InvalidRequestError, shown
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
        stop=normalize_stop(body.stop_sequences, param="stop_sequences"),
        template_kwargs=_thinking_kwargs(body.thinking),
        output_format=anthropic_output_format(body.output_config, anthropic_path("output_config")),
    )


def to_chat_messages(body: MessagesBody) -> list[dict[str, Any]]:
    """System (top-level and inline ``role: system`` turns) first, then the turns in order."""
    system_parts = [_text_of(body.system, anthropic_path("system"))] if body.system else []
    turns: list[dict[str, Any]] = []
    root = anthropic_path("messages")
    for i, message in enumerate(body.messages):
        at = root / i
        message = as_object(message, at)
        role = opt_str(message, "role", at)
        if role == "system":  # Claude Code sends these inside messages; fold them into the system prompt
            system_parts.append(_text_of(message.get("content"), at / "content"))
        elif role == "user":
            turns.extend(_user_turns(message.get("content"), at / "content"))
        elif role == "assistant":
            turns.append(_assistant_turn(message.get("content"), at / "content"))
        else:
            raise InvalidRequestError(f"messages.{i}.role: must be 'user' or 'assistant', got {shown(repr(role))}.", param=f"messages.{i}.role")
    merged = _merge_same_role(turns)
    system = "\n\n".join(p for p in system_parts if p)
    return ([{"role": "system", "content": system}] if system else []) + merged


def _text_of(content: Any, at: JsonPath) -> str:
    """A string, or the text blocks of a block list joined by newlines (other blocks skipped)."""
    if content is None or isinstance(content, str):
        return content or ""
    blocks = [(at / j, as_object(block, at / j)) for j, block in enumerate(expect(content, at, str, list))]
    return "\n".join(opt_str(block, "text", where) or "" for where, block in blocks if kind_of(block, where) == "text")


def _blocks(content: Any, at: JsonPath) -> list[tuple[JsonPath, dict[str, Any]]]:
    """Each content block with its path; a string is one text block."""
    if isinstance(content, str):
        return [(at / 0, {"type": "text", "text": content})]
    return [(at / j, as_object(block, at / j)) for j, block in enumerate(expect(content, at, str, list))]


def _user_turns(content: Any, at: JsonPath) -> list[dict[str, Any]]:
    """Tool results become tool messages (before the turn's text, as the API orders them)."""
    tool_messages, texts = [], []
    for where, block in _blocks(content, at):
        kind = kind_of(block, where)
        if kind == "text":
            texts.append(opt_str(block, "text", where) or "")
        elif kind == "tool_result":
            result = _text_of(block.get("content"), where / "content")
            if opt_bool(block, "is_error", where):
                result = f"Error: {result}"
            tool_messages.append({"role": "tool", "tool_call_id": opt_str(block, "tool_use_id", where), "content": result})
        elif kind in ("image", "document"):
            raise InvalidRequestError(f"{where}: this model does not accept {kind} input.", param=where.text)
        # Other block types (search_result, tool_reference, ...) carry nothing a text model can use.
    return tool_messages + ([{"role": "user", "content": "\n".join(texts)}] if texts else [])


def _assistant_turn(content: Any, at: JsonPath) -> dict[str, Any]:
    texts, thinking, calls = [], [], []
    for where, block in _blocks(content, at):
        kind = kind_of(block, where)
        if kind == "text":
            texts.append(opt_str(block, "text", where) or "")
        elif kind == "thinking":
            thinking.append(opt_str(block, "thinking", where) or "")
        elif kind == "tool_use":
            calls.append(_tool_call(block, where))
    turn: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if thinking:
        turn["reasoning_content"] = "\n".join(thinking)
    if calls:
        turn["tool_calls"] = calls
    return turn


def _tool_call(block: dict[str, Any], at: JsonPath) -> dict[str, Any]:
    """A tool_use block as a chat tool call; its input must be an object (templates iterate it)."""
    function = {"name": opt_str(block, "name", at) or "", "arguments": opt_object(block, "input", at) or {}}
    return {"id": opt_str(block, "id", at), "type": "function", "function": function}


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
    root = anthropic_path("tools")
    for i, tool in enumerate(tools or []):
        at = root / i
        tool = as_object(tool, at)
        if kind_of(tool, at) not in _CLIENT_TOOL_TYPES or opt_bool(tool, "defer_loading", at):
            continue  # server tools and deferred tools never reach the prompt
        schema = opt_object(tool, "input_schema", at)
        function = {"name": req_str(tool, "name", at), "parameters": schema or {"type": "object", "properties": {}}}
        if description := opt_str(tool, "description", at):
            function["description"] = description
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: dict[str, Any] | None) -> tuple[ToolChoice, bool]:
    if not choice:
        return ToolChoice(), True
    at = anthropic_path("tool_choice")
    parallel = not opt_bool(choice, "disable_parallel_tool_use", at)
    kind = kind_of(choice, at)
    if kind == "auto":
        return ToolChoice("auto"), parallel
    if kind == "any":
        return ToolChoice("required"), parallel
    if kind == "none":
        return ToolChoice("none"), parallel
    if kind == "tool":
        return ToolChoice("named", req_str(choice, "name", at)), parallel
    raise InvalidRequestError("tool_choice.type: must be one of 'auto', 'any', 'tool' or 'none'.", param="tool_choice.type")


def _thinking_kwargs(thinking: dict[str, Any] | None) -> dict[str, Any]:
    """Map Anthropic's thinking switch onto the chat template's ``enable_thinking``."""
    if not thinking:
        return {}
    at = anthropic_path("thinking")
    opt_int(thinking, "budget_tokens", at)
    kind = kind_of(thinking, at)
    if kind == "disabled":
        return {"enable_thinking": False}
    if kind in ("enabled", "adaptive"):
        return {"enable_thinking": True}
    raise InvalidRequestError("thinking.type: must be 'enabled', 'disabled' or 'adaptive'.", param="thinking.type")
