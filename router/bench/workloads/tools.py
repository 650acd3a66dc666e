"""``tools``: prompts that need a tool, through the API — does the server's parsing hold, whole and streamed?

Each case is sent once streamed (phase ``stream``) and once whole (phase ``whole``). An
outcome per request: ``ok`` (a call of the expected tool whose arguments parse and validate
against its JSON schema, nothing leaked), else the first failure of ``leaked`` (tool-call
markup in the content), ``missing`` (no call), ``unparsed`` (arguments not a JSON object),
``wrong_tool``, ``invalid_arguments``; a case that expects no call is ``ok`` without one and
``unexpected_call`` with one. A request that failed outright is ``error``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import validators

from router.bench import stats
from router.bench.client import RequestRecord
from router.bench.phase import Figures, PhaseContext, Series

OUTCOMES = ("ok", "leaked", "missing", "unparsed", "wrong_tool", "invalid_arguments", "unexpected_call", "error")
# Tool-call markup of the families in parsers/: seen in content, a call leaked instead of parsing.
LEAK_MARKERS = (
    "<tool_call>", "</tool_call>", "<function=", "<|python_tag|>", "[TOOL_CALLS]", "<|tool_call", "<tool_calls>",
    "<｜tool▁call", "<arg_key>", "<|action_start|>", '"arguments":', '"parameters":', "functions.",
)


@dataclass
class ToolCase:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]  # OpenAI function tools
    expect: str | None  # the tool that must be called; None: no call expected

    def schema(self, name: str) -> dict[str, Any] | None:
        for tool in self.tools:
            if tool["function"]["name"] == name:
                return tool["function"].get("parameters") or {"type": "object"}
        return None


def demo_cases() -> list[ToolCase]:
    """The demo model's own evaluation requests that need its weather, search or file tool."""
    from engines.demo.evaluate import eval_cases

    return [ToolCase(c["messages"], c["tools"], c["expect"]["name"]) for c in eval_cases() if c["kind"].startswith("call_")]


def load_cases(path: Path) -> list[ToolCase]:
    """A JSONL file: one ``{"messages": [...], "tools": [...], "expect": "tool name" | null}`` per line."""
    cases = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            cases.append(ToolCase(data["messages"], data["tools"], data.get("expect")))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a tool case ({exc})") from exc
    return cases


def anthropic_case(case: ToolCase) -> dict[str, Any]:
    """The case as an Anthropic Messages request (system and user/assistant text messages only)."""
    system = "\n".join(m["content"] for m in case.messages if m["role"] == "system")
    messages = [{"role": m["role"], "content": m["content"]} for m in case.messages if m["role"] != "system"]
    if any(m["role"] not in ("user", "assistant") or not isinstance(m["content"], str) for m in messages):
        raise ValueError("tool cases with tool messages or content parts are sent with --api openai only")
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"].get("parameters") or {"type": "object"}} for t in case.tools]
    return {"messages": messages, "tools": tools, **({"system": system} if system else {})}


def parsed_calls(record: RequestRecord) -> list[tuple[str, dict[str, Any]]] | None:
    """(name, arguments) of each call; None if any call's arguments are not a JSON object."""
    parsed = []
    for call in record.tool_calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return None
        if not isinstance(arguments, dict):
            return None
        parsed.append((call.name, arguments))
    return parsed


def outcome(case: ToolCase, record: RequestRecord) -> str:
    if not record.ok:
        return "error"
    if any(marker in record.content for marker in LEAK_MARKERS):
        return "leaked"
    if case.expect is None:
        return "unexpected_call" if record.tool_calls else "ok"
    if not record.tool_calls:
        return "missing"
    parsed = parsed_calls(record)
    if parsed is None:
        return "unparsed"
    wanted = [arguments for name, arguments in parsed if name == case.expect]
    if not wanted:
        return "wrong_tool"
    schema = case.schema(case.expect)
    validator = validators.validator_for(schema)(schema)
    return "ok" if all(validator.is_valid(arguments) for arguments in wanted) else "invalid_arguments"


@dataclass
class ToolsWorkload:
    cases: list[ToolCase]
    name: str = "tools"
    # "required": every request must call a tool (rapid-mlx constrains the output to the family's
    # format); only the cases that expect a call are sent then.
    tool_choice: str = "auto"

    @classmethod
    def from_args(cls, args) -> ToolsWorkload:
        cases = load_cases(args.cases) if args.cases else demo_cases()
        if args.tool_choice == "required":
            cases = [case for case in cases if case.expect is not None]
        return cls(cases[: args.limit] if args.limit else cases, tool_choice=args.tool_choice)

    def phases(self) -> list[str]:
        return ["stream", "whole"]

    def planned_requests(self, phase: str) -> int:
        return len(self.cases)

    async def run(self, ctx: PhaseContext) -> None:
        for number, case in enumerate(self.cases):
            request = {"messages": case.messages, "tools": case.tools} if ctx.client.api == "openai" else anthropic_case(case)
            if self.tool_choice == "required":
                request["tool_choice"] = "required" if ctx.client.api == "openai" else {"type": "any"}
            await ctx.send(request, stream=ctx.phase == "stream", labels={"case": number, "expect": case.expect})

    def outcomes(self, records: list[RequestRecord]) -> Counter[str]:
        return Counter(outcome(self.cases[r.labels["case"]], r) for r in records)

    def figures(self, phase: str, records: list[RequestRecord]) -> Figures:
        counts = self.outcomes(records)
        return {
            **stats.request_figures(records),
            **{f"outcome_{name}": float(counts[name]) for name in OUTCOMES},
            "calls_parsed": float(sum(1 for r in records if r.ok and r.tool_calls and parsed_calls(r) is not None)),
            "failure_rate": stats.ratio(float(len(records) - counts["ok"]), float(len(records))),
        }

    def series(self, phase: str, records: list[RequestRecord]) -> Series:
        counts = self.outcomes(records)
        return {"outcome_counts": [float(counts[name]) for name in OUTCOMES]}
