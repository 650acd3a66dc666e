"""``rapid-mlx bench tools --scripted``: each family's tool-call format, scripted, through the parsers.

No model and no server: for every tool-call family this writes the outputs a model of that
family emits (a plain answer, one call after some text, a call whose strings need escaping,
two calls at once, a call cut off by ``max_tokens``) in the family's own syntax, and feeds
each to the router's parsers whole and streamed (one character at a time and in seeded random
chunks of 1-8 characters). What a client would receive is classified as ``tools`` classifies a
server's answers, plus ``different``: a call that parses, but not to the scripted name and
arguments. A streamed call cut off mid-arguments shows what an OpenAI streaming client keeps:
the started call's argument fragments.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from parsers import ContentDelta, ParseEvent, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, dump_arguments, make_output_parser
from router.bench.client import ToolCall
from router.bench.workloads.tools import OUTCOMES, ToolCase, outcome
from router.turn.turn import SentCalls

Call = tuple[str, dict[str, Any]]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}},
]


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _each(render_one: Callable[[str, dict[str, Any]], str], sep: str = "") -> Callable[[list[Call]], str]:
    return lambda calls: sep.join(render_one(name, args) for name, args in calls)


def _text(value: Any) -> str:
    """A parameter value as text-valued formats write it: strings raw, the rest as JSON."""
    return value if isinstance(value, str) else _j(value)


def _xml_params(args: dict[str, Any], open_param: Callable[[str], str], close_param: str) -> str:
    return "".join(open_param(k) + _text(v) + close_param for k, v in args.items())


def _pythonic(calls: list[Call]) -> str:
    return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"


def _cohere_actions(calls: list[Call]) -> str:
    actions = [{"tool_call_id": str(i), "tool_name": n, "parameters": a} for i, (n, a) in enumerate(calls)]
    return "<|START_ACTION|>" + _j(actions) + "<|END_ACTION|>"


# Tool parser → how its family writes a list of calls (reference/tool-formats.md).
RENDER: dict[str, Callable[[list[Call]], str]] = {
    "hermes": _each(lambda n, a: f"<tool_call>\n{_j({'name': n, 'arguments': a})}\n</tool_call>", "\n"),
    "llama3_json": lambda calls: "<|python_tag|>" + "; ".join(_j({"name": n, "parameters": a}) for n, a in calls),
    "mistral": _each(lambda n, a: f"[TOOL_CALLS]{n}[ARGS]{_j(a)}"),
    "kimi_k2": lambda calls: ("<|tool_calls_section_begin|>" + "".join(
        f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{_j(a)}<|tool_call_end|>"
        for i, (n, a) in enumerate(calls)) + "<|tool_calls_section_end|>"),
    "deepseek_v3": lambda calls: ("<｜tool▁calls▁begin｜>" + "\n".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_j(a)}\n```<｜tool▁call▁end｜>" for n, a in calls)
        + "<｜tool▁calls▁end｜>"),
    "deepseek_v31": lambda calls: ("<｜tool▁calls▁begin｜>" + "".join(
        f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}<｜tool▁call▁end｜>" for n, a in calls) + "<｜tool▁calls▁end｜>"),
    "deepseek_v32": lambda calls: ("<｜DSML｜function_calls>\n" + "".join(
        f'<｜DSML｜invoke name="{n}">\n' + "".join(
            f'<｜DSML｜parameter name="{k}" string="{str(isinstance(v, str)).lower()}">{_text(v)}</｜DSML｜parameter>\n'
            for k, v in a.items()) + "</｜DSML｜invoke>\n" for n, a in calls) + "</｜DSML｜function_calls>"),
    "openai": _each(lambda n, a: f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{_j(a)}<|call|>"),
    "qwen3_coder": _each(lambda n, a: f"<tool_call>\n<function={n}>\n"
                         + _xml_params(a, lambda k: f"<parameter={k}>\n", "\n</parameter>\n") + "</function>\n</tool_call>", "\n"),
    "seed_oss": _each(lambda n, a: f"<seed:tool_call>\n<function={n}>\n"
                      + _xml_params(a, lambda k: f"<parameter={k}>\n", "\n</parameter>\n") + "</function>\n</seed:tool_call>"),
    "minimax_m2": lambda calls: ("<minimax:tool_call>\n" + "".join(
        f'<invoke name="{n}">\n' + _xml_params(a, lambda k: f'<parameter name="{k}">', "</parameter>\n") + "</invoke>\n"
        for n, a in calls) + "</minimax:tool_call>"),
    "step3": lambda calls: ("<｜tool_calls_begin｜>" + "".join(
        f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{n}">'
        + _xml_params(a, lambda k: f'<steptml:parameter name="{k}">', "</steptml:parameter>")
        + "</steptml:invoke><｜tool_call_end｜>" for n, a in calls) + "<｜tool_calls_end｜>"),
    "glm47": _each(lambda n, a: f"<tool_call>{n}" + "".join(
        f"<arg_key>{k}</arg_key><arg_value>{_text(v)}</arg_value>" for k, v in a.items()) + "</tool_call>"),
    "gemma4": _each(lambda n, a: f"<|tool_call>call:{n}{{" + ",".join(
        f'{k}:<|"|>{v}<|"|>' if isinstance(v, str) else f"{k}:{_j(v)}" for k, v in a.items()) + "}<tool_call|>"),
    "granite": lambda calls: "<|tool_call|>" + _j([{"name": n, "arguments": a} for n, a in calls]),
    "jamba": lambda calls: "<tool_calls>" + _j([{"name": n, "arguments": a} for n, a in calls]) + "</tool_calls>",
    "internlm": _each(lambda n, a: "<|action_start|><|plugin|>" + _j({"name": n, "parameters": a}) + "<|action_end|>"),
    "apertus": lambda calls: "<|tools_prefix|>" + _j([{n: a} for n, a in calls]) + "<|tools_suffix|>",
    "phi4_mini_json": lambda calls: "functools" + _j([{"name": n, "arguments": a} for n, a in calls]),
    "cohere_command3": _cohere_actions,
    "cohere_command4": _cohere_actions,
    "pythonic": _pythonic,
    "lfm2": lambda calls: "<|tool_call_start|>" + _pythonic(calls) + "<|tool_call_end|>",
}
# Families whose call list opens the reply: text goes after it, not before.
LEADING = frozenset({"pythonic"})


@dataclass(frozen=True)
class Script:
    name: str
    calls: list[Call]
    truncated: bool = False  # the output stops inside the last call (finish_reason "length")


SCRIPTS = [
    Script("answer", []),
    Script("call", [("get_weather", {"city": "Paris", "unit": "C"})]),
    Script("escapes", [("write_file", {"path": "src/a b.py",
                                       "content": 'print("hi, {name}")\n\tx = [1, 2]  # ü 日本 \\n'})]),
    Script("parallel", [("get_weather", {"city": "Oslo"}), ("search", {"query": "mlx batching", "limit": 3})]),
    Script("truncated", [("write_file", {"path": "notes.md", "content": "A long file body that never ends " * 4})],
           truncated=True),
]
PROSE = "Let me do that."


ANSWER = "The weather in Paris is mild today; no tool needed."


def script_text(family: str, script: Script) -> str:
    if not script.calls:
        return ANSWER
    calls = RENDER[family](script.calls)
    if script.truncated:
        return PROSE + " " + calls[: len(calls) * 2 // 3]
    return calls + " " + PROSE if family in LEADING else PROSE + " " + calls


@dataclass
class Observed:
    """What a client of the API got: as ``RequestRecord`` has it, for ``tools.outcome``."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    ok: bool = True


def observe(events: Iterable[ParseEvent], *, streamed: bool) -> Observed:
    """Whole: the calls that ended. Streamed: every started call with its argument fragments, as a
    streaming client accumulates them (a call cut off mid-arguments keeps what was sent)."""
    seen = Observed()
    calls: dict[int, ToolCall] = {}
    ended: set[int] = set()
    for event in events:
        if isinstance(event, ContentDelta):
            seen.content += event.text
        elif isinstance(event, ToolCallStart):
            calls[event.index] = ToolCall(name=event.name, arguments="")
        elif isinstance(event, ToolCallArgsDelta) and event.index in calls:
            calls[event.index].arguments += event.text
        elif isinstance(event, ToolCallEnd):
            ended.add(event.index)
            if not streamed and event.index in calls:
                calls[event.index].arguments = _j(event.arguments)
    seen.tool_calls = [call for index, call in calls.items() if streamed or index in ended]
    return seen


def classify(script: Script, seen: Observed, *, streamed: bool) -> str:
    """``tools``' outcome, with a scripted answer known exactly: a call must parse to the script's."""
    if script.truncated:
        return _classify_truncated(script, seen, streamed=streamed)
    if script.calls and seen.content.strip() not in ("", PROSE):  # any other text is the call's markup
        return "leaked"
    if not script.calls and seen.content != ANSWER:
        return "different"
    expect = script.calls[0][0] if script.calls else None
    verdict = outcome(ToolCase([], TOOLS, expect), seen)
    if verdict != "ok" or not script.calls:
        return verdict
    got = [(call.name, json.loads(call.arguments or "{}")) for call in seen.tool_calls]
    return "ok" if got == script.calls else "different"


def _classify_truncated(script: Script, seen: Observed, *, streamed: bool) -> str:
    """Cut off inside a call. Whole: no call, the cut text as content (what the model wrote).
    Streamed: the same, or, for a family whose parser had sent the call's start, the call's
    fragments so far, as every OpenAI-style server streams them up to finish_reason "length" —
    a prefix of the real arguments, and the markup not sent again as content."""
    if not streamed or not seen.tool_calls:  # no call was sent: the text is all there is
        return "unparsed" if seen.tool_calls else "ok"
    if seen.content.strip() != PROSE:
        return "leaked"
    full = dump_arguments(script.calls[-1][1])
    return "ok" if all(full.startswith(call.arguments) for call in seen.tool_calls) else "different"


def run_parser(family: str, text: str, chunks: list[str], *, streamed: bool) -> Observed:
    """What a client gets, streamed or whole, with the router's own rule for a cut-off call (``SentCalls``)."""
    parser = make_output_parser(tool_parser=family, reasoning_parser=None, tools=TOOLS)
    sent, events = SentCalls(), []
    for chunk in chunks:
        for event in parser.feed(chunk):
            sent.saw(event)
            events.append(event)
    last = parser.finish()
    if streamed and parser.truncated_call:
        last = sent.without_cut_call_text(last)
    return observe(events + last, streamed=streamed)


def random_chunks(text: str, rng: random.Random) -> list[str]:
    out, at = [], 0
    while at < len(text):
        step = rng.randint(1, 8)
        out.append(text[at : at + step])
        at += step
    return out


MODES = ("whole", "chars", "random")


def family_outcomes(family: str, seeds: int = 3) -> dict[tuple[str, str], Counter[str]]:
    """(script, mode) → outcome counts, for one family."""
    results: dict[tuple[str, str], Counter[str]] = {}
    for script in SCRIPTS:
        text = script_text(family, script)
        runs = {"whole": [[text]], "chars": [list(text)],
                "random": [random_chunks(text, random.Random(seed)) for seed in range(seeds)]}
        for mode, groupings in runs.items():
            results[(script.name, mode)] = Counter(
                classify(script, run_parser(family, text, chunks, streamed=mode != "whole"), streamed=mode != "whole") for chunks in groupings)
    return results


def scripted_report(families: Iterable[str] | None = None) -> tuple[str, int]:
    """A markdown failure report over every family, and the number of failed runs."""
    names = list(families or RENDER)
    header = "| family | " + " | ".join(s.name for s in SCRIPTS) + " | failed runs |"
    lines = ["Scripted tool-call outputs through the parsers: per script, whole / one char at a time / "
             "random 1-8 char chunks (3 seeds); a cell lists the outcomes that were not ok.", "",
             header, "|" + "---|" * (len(SCRIPTS) + 2)]
    totals: Counter[str] = Counter()
    failed_runs = 0
    for family in names:
        results = family_outcomes(family)
        cells, failed = [], 0
        for script in SCRIPTS:
            bad = Counter()
            for mode in MODES:
                for verdict, count in results[(script.name, mode)].items():
                    totals[verdict] += count
                    if verdict != "ok":
                        bad[f"{mode}:{verdict}"] += count
            failed += sum(bad.values())
            cells.append("ok" if not bad else ", ".join(f"{k}×{v}" for k, v in sorted(bad.items())))
        failed_runs += failed
        lines.append(f"| {family} | " + " | ".join(cells) + f" | {failed} |")
    runs = sum(totals.values())
    lines += ["", f"{runs} runs, {failed_runs} not ok; outcomes: "
              + ", ".join(f"{name} {totals[name]}" for name in (*OUTCOMES, "different") if totals[name])]
    return "\n".join(lines) + "\n", failed_runs
