"""Runs a case through the streaming parser and checks the event-stream invariants."""

from __future__ import annotations

import random
import re
from typing import Any

from parsers import (
    ContentDelta,
    ReasoningDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    dump_arguments,
    events_to_result,
    make_output_parser,
    parse_output,
)

GENERATED_ID = re.compile(r"call_[A-Za-z0-9]{24}|[A-Za-z0-9]{9}")


def run(case: dict[str, Any], chunks: list[str]) -> tuple[dict[str, Any], list, bool]:
    """Feed chunks, finish; return (result rebuilt from events, events, truncated flag)."""
    parser = make_output_parser(tool_parser=case["parser"], reasoning_parser=case["reasoning_parser"],
                                tools=case["tools"], thinking_forced_open=case["forced"])
    events: list = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    return events_to_result(events), events, parser.truncated_call


def check_events(case: dict[str, Any], events: list) -> None:
    """Invariants every event stream must satisfy, whatever the chunking."""
    names = None
    if case["tools"] is not None:
        names = {(t.get("function") or t)["name"] for t in case["tools"]}
    open_index, seen_ids, args, next_index = None, set(), {}, 0
    content_started = False
    for event in events:
        if isinstance(event, ContentDelta):
            assert event.text, "empty content delta"
            content_started = True
        elif isinstance(event, ReasoningDelta):
            assert event.text, "empty reasoning delta"
            assert not content_started, "reasoning after content"
        elif isinstance(event, ToolCallStart):
            content_started = True
            assert event.index == next_index, "indexes must count up from 0"
            assert event.id and event.id not in seen_ids, "ids must be set and distinct"
            assert event.name, "name must be complete and non-empty"
            seen_ids.add(event.id)
            next_index += 1
            open_index = event.index
            args[event.index] = []
        elif isinstance(event, ToolCallArgsDelta):
            assert event.index == open_index, "argument delta for a call that is not open"
            assert event.text
            args[event.index].append(event.text)
        elif isinstance(event, ToolCallEnd):
            assert event.index == open_index, "end for a call that is not open"
            assert "".join(args[event.index]) == dump_arguments(event.arguments), "deltas != final JSON"
            start = next(e for e in events if isinstance(e, ToolCallStart) and e.index == event.index)
            assert event.offered == (names is None or start.name in names)
            open_index = None


def normalise(result: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """Replace generated ids by a placeholder (checking their shape) so runs compare."""
    native = {c["id"] for c in case["calls"] if c["id"]}
    calls = []
    for c in result["tool_calls"]:
        call_id = c["id"]
        if call_id not in native:
            assert GENERATED_ID.fullmatch(call_id), f"bad generated id {call_id!r}"
            call_id = None
        calls.append({"name": c["name"], "arguments": c["arguments"], "id": call_id})
    return {"content": result["content"], "reasoning": result["reasoning"], "tool_calls": calls}


def expected(case: dict[str, Any]) -> dict[str, Any]:
    calls = [{"name": c["name"], "arguments": c["arguments"], "id": c["id"]} for c in case["calls"]]
    return {"content": case["content"], "reasoning": case["reasoning"], "tool_calls": calls}


def offered_flags(events: list) -> list[bool]:
    return [e.offered for e in events if isinstance(e, ToolCallEnd)]


def random_chunks(text: str, rng: random.Random) -> list[str]:
    """Split text at random points (some chunks empty, some long)."""
    cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(0, 12))))
    pieces, last = [], 0
    for cut in [*cuts, len(text)]:
        pieces.append(text[last:cut])
        last = cut
    return pieces


def check_case(case: dict[str, Any], chunks: list[str]) -> None:
    """The full check of one case under one chunking."""
    result, events, truncated = run(case, chunks)
    check_events(case, events)
    got, want = normalise(result, case), expected(case)
    assert got == want, f"chunks={chunks!r}\n got: {got!r}\nwant: {want!r}"
    assert truncated == case["truncated"], f"truncated={truncated} chunks={chunks!r}"
    assert offered_flags(events) == [c["offered"] for c in case["calls"]]


def whole(case: dict[str, Any]) -> dict[str, Any]:
    return parse_output(case["text"], tool_parser=case["parser"], reasoning_parser=case["reasoning_parser"],
                        tools=case["tools"], thinking_forced_open=case["forced"])
