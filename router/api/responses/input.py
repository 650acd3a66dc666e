"""Responses request → TurnRequest: input items to chat messages, flat tools, choices, effort."""

from __future__ import annotations

from typing import Any

from router.turn.messages import content_text
from router.errors import InvalidRequestError
from router.api.responses.schemas import ResponsesBody
from router.turn.sampling import SamplingInput
from router.turn.turn import ToolChoice, TurnRequest

def to_turn_request(body: ResponsesBody, history: list[dict[str, Any]]) -> TurnRequest:
    """``history`` holds the chat messages of ``previous_response_id``'s conversation, if any."""
    messages = ([{"role": "system", "content": body.instructions}] if body.instructions else []) + history + input_messages(body.input)
    if not messages:
        raise InvalidRequestError("'input' must not be empty.", param="input")
    return TurnRequest(
        messages=messages,
        tools=flat_tools(body.tools),
        tool_choice=_tool_choice(body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls is not False,
        max_tokens=body.max_output_tokens,
        max_tokens_param="max_output_tokens",
        sampling=SamplingInput(temperature=body.temperature, top_p=body.top_p),
        template_kwargs=_effort_kwargs(body.reasoning),
        messages_param="input",
    )


def input_messages(items: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items in order; function calls join the assistant turn before them, reasoning the one after."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}] if items else []
    messages: list[dict[str, Any]] = []
    pending_reasoning: list[str] = []
    for i, item in enumerate(items):
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            message = _message(item, i)
            if message["role"] == "assistant" and pending_reasoning:
                message["reasoning_content"], pending_reasoning = "\n".join(pending_reasoning), []
            messages.append(message)
        elif kind == "function_call":
            _append_call(messages, item, i, pending_reasoning)
            pending_reasoning = []
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": content_text(item.get("output"), f"input[{i}].output", skip_unknown=True)})
        elif kind == "reasoning":
            pending_reasoning += [p.get("text", "") for p in (item.get("content") or item.get("summary") or []) if isinstance(p, dict)]
        # Other item types (web_search_call, custom tool calls...) have no local meaning: skipped.
    return messages


def _message(item: dict[str, Any], index: int) -> dict[str, Any]:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise InvalidRequestError(f"input[{index}].role must be user, assistant, system or developer.", param=f"input[{index}].role")
    return {"role": "system" if role == "developer" else role, "content": content_text(item.get("content"), f"input[{index}].content", skip_unknown=True)}


def _append_call(messages: list[dict[str, Any]], item: dict[str, Any], index: int, reasoning: list[str]) -> None:
    if not isinstance(item.get("name"), str):
        raise InvalidRequestError(f"input[{index}].name is required.", param=f"input[{index}].name")
    call = {"id": item.get("call_id"), "type": "function", "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        if reasoning:
            messages[-1]["reasoning_content"] = "\n".join(reasoning)


def flat_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Function tools, with namespace members flattened; every other tool type is ignored."""
    out = []
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            out += flat_tools(tool.get("tools")) or []
        elif tool.get("type") == "function" and isinstance(tool.get("name"), str):
            function = {"name": tool["name"], "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
            if tool.get("description"):
                function["description"] = tool["description"]
            out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: str | dict[str, Any] | None) -> ToolChoice:
    if choice is None or choice == "auto":
        return ToolChoice()
    if choice in ("none", "required"):
        return ToolChoice(choice)
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return ToolChoice("named", choice["name"])
    if isinstance(choice, dict):
        return ToolChoice()  # allowed_tools, hosted tools...: no local constraint applies
    raise InvalidRequestError("tool_choice must be 'auto', 'none', 'required' or a function.", param="tool_choice")


def _effort_kwargs(reasoning: dict[str, Any] | None) -> dict[str, Any]:
    effort = (reasoning or {}).get("effort")
    if effort is None:
        return {}
    return {"enable_thinking": effort not in ("none", "minimal")}
