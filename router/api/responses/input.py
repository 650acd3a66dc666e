"""Responses request → TurnRequest: input items to chat messages, flat tools, choices, effort.

Item and tool types we do not know are skipped (Codex sends many); a field we read holding
the wrong JSON type is a 400 naming its path (``input[2].content[0].text``).
"""

from __future__ import annotations

from typing import Any

from router.turn.fields import JsonPath, as_object, kind_of, openai_path, opt_bool, opt_list, opt_object, opt_str, optional, req_str
from router.turn.messages import content_text
from router.errors import InvalidRequestError
from router.api.responses.schemas import ResponsesBody
from router.turn.sampling import SamplingInput
from router.turn.structured import responses_text_format
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
        output_format=responses_text_format(body.text, openai_path("text")),
    )


def input_messages(items: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items in order; function calls join the assistant turn before them, reasoning the one after."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}] if items else []
    messages: list[dict[str, Any]] = []
    pending_reasoning: list[str] = []
    root = openai_path("input")
    for i, item in enumerate(items):
        at = root / i
        item = as_object(item, at)
        kind = kind_of(item, at) or ("message" if "role" in item else None)
        if kind == "message":
            message = _message(item, at)
            if message["role"] == "assistant" and pending_reasoning:
                message["reasoning_content"], pending_reasoning = "\n".join(pending_reasoning), []
            messages.append(message)
        elif kind == "function_call":
            _append_call(messages, item, at, pending_reasoning)
            pending_reasoning = []
        elif kind == "function_call_output":
            output = content_text(item.get("output"), at / "output", skip_unknown=True)
            messages.append({"role": "tool", "tool_call_id": opt_str(item, "call_id", at), "content": output})
        elif kind == "reasoning":
            pending_reasoning += _reasoning_texts(item, at)
        # Other item types (web_search_call, custom tool calls...) have no local meaning: skipped.
    return messages


def _message(item: dict[str, Any], at: JsonPath) -> dict[str, Any]:
    role = opt_str(item, "role", at)
    if role not in ("user", "assistant", "system", "developer"):
        raise InvalidRequestError(f"{at}.role must be user, assistant, system or developer.", param=f"{at}.role")
    return {"role": "system" if role == "developer" else role, "content": content_text(item.get("content"), at / "content", skip_unknown=True)}


def _reasoning_texts(item: dict[str, Any], at: JsonPath) -> list[str]:
    """The texts of a reasoning item: its content parts, else its summary parts."""
    content, summary = opt_list(item, "content", at), opt_list(item, "summary", at)
    key, parts = ("content", content) if content else ("summary", summary or [])
    return [opt_str(as_object(part, at / key / j), "text", at / key / j) or "" for j, part in enumerate(parts)]


def _append_call(messages: list[dict[str, Any]], item: dict[str, Any], at: JsonPath, reasoning: list[str]) -> None:
    arguments = optional(item, "arguments", at, str, dict) or "{}"
    call = {"id": opt_str(item, "call_id", at), "type": "function", "function": {"name": req_str(item, "name", at), "arguments": arguments}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        if reasoning:
            messages[-1]["reasoning_content"] = "\n".join(reasoning)


def flat_tools(tools: list[Any] | None, at: JsonPath | None = None) -> list[dict[str, Any]] | None:
    """Function tools, with namespace members flattened; every other tool type is ignored."""
    out = []
    root = at or openai_path("tools")
    for i, tool in enumerate(tools or []):
        where = root / i
        tool = as_object(tool, where)
        kind = kind_of(tool, where)
        if kind == "namespace":
            out += flat_tools(opt_list(tool, "tools", where), where / "tools") or []
        elif kind == "function":
            out.append({"type": "function", "function": _function(tool, where)})
    return out or None


def _function(tool: dict[str, Any], at: JsonPath) -> dict[str, Any]:
    """A flat Responses function tool as the chat ``function`` object the template renders."""
    parameters = opt_object(tool, "parameters", at)
    function = {"name": req_str(tool, "name", at), "parameters": parameters or {"type": "object", "properties": {}}}
    if opt_bool(tool, "strict", at):  # only when the client says so: constrained calls cost a mask per step
        function["strict"] = True
    if description := opt_str(tool, "description", at):
        function["description"] = description
    return function


def _tool_choice(choice: str | dict[str, Any] | None) -> ToolChoice:
    if choice is None or choice == "auto":
        return ToolChoice()
    if choice in ("none", "required"):
        return ToolChoice(choice)
    if isinstance(choice, dict):
        at = openai_path("tool_choice")
        if kind_of(choice, at) == "function":
            return ToolChoice("named", req_str(choice, "name", at))
        return ToolChoice()  # allowed_tools, hosted tools...: no local constraint applies
    raise InvalidRequestError("tool_choice must be 'auto', 'none', 'required' or a function.", param="tool_choice")


def _effort_kwargs(reasoning: dict[str, Any] | None) -> dict[str, Any]:
    effort = opt_str(reasoning or {}, "effort", openai_path("reasoning"))
    if effort is None:
        return {}
    return {"enable_thinking": effort not in ("none", "minimal")}
