"""``rapid-mlx bench parsers``: streaming-parser cost per token on long outputs, against a decode step.

The router runs the output parser once per engine step for every stream, so its per-token
cost must stay far below a decode step. For each tool-call family this feeds a long output
(a few thousand tokens of prose, then a tool call whose string argument is a long file body)
in 4-character chunks (about one BPE token each) and reports microseconds per chunk. The
baseline is one decode step of a real MLX model (``--size``) measured in the same run. It runs
in process: the parsers are the router's own, and no server is involved.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parsers import ToolCallEnd, make_output_parser

CHUNK = 4
PROSE = "The scheduler admits requests in order and decodes them together. " * 120
BODY = "def handler(request):\n    return {'status': 'ok', 'items': [1, 2, 3]}\n" * 60
ARGS = {"path": "src/app.py", "content": BODY}

# family -> (tool_parser, reasoning_parser, output text)
FAMILIES = {
    "hermes": ("hermes", "qwen3", f"<think>{PROSE}</think>{PROSE}<tool_call>\n" + json.dumps({"name": "write_file", "arguments": ARGS}) + "\n</tool_call>"),
    "qwen3_coder": ("qwen3_coder", "qwen3", f"<think>{PROSE}</think>{PROSE}<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
                    f"<parameter=content>\n{BODY}\n</parameter>\n</function>\n</tool_call>"),
    "llama3_json": ("llama3_json", None, f"{PROSE}<|python_tag|>" + json.dumps({"name": "write_file", "parameters": ARGS})),
    "mistral": ("mistral", None, f"{PROSE}[TOOL_CALLS]write_file[ARGS]" + json.dumps(ARGS)),
    "kimi_k2": ("kimi_k2", None, f"{PROSE}<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>"
                + json.dumps(ARGS) + "<|tool_call_end|><|tool_calls_section_end|>"),
    "glm47": ("glm47", None, f"{PROSE}<tool_call>write_file<arg_key>path</arg_key><arg_value>src/app.py</arg_value>"
              f"<arg_key>content</arg_key><arg_value>{BODY}</arg_value></tool_call>"),
    "gemma4": ("gemma4", "gemma4", f"<|channel>thought\n{PROSE}<channel|>{PROSE}<|tool_call>call:write_file{{path:<|\"|>src/app.py<|\"|>,"
               f"content:<|\"|>{BODY}<|\"|>}}<tool_call|>"),
    "minimax (M1)": ("minimax", None, f"{PROSE}<tool_calls>\n" + json.dumps({"name": "write_file", "arguments": ARGS}) + "\n</tool_calls>"),
    "cohere_command3": ("cohere_command3", "cohere_command3", f"<|START_THINKING|>{PROSE}<|END_THINKING|><|START_RESPONSE|>{PROSE}"
                        "<|END_RESPONSE|><|START_ACTION|>" + json.dumps([{"tool_call_id": "0", "tool_name": "write_file", "parameters": ARGS}])
                        + "<|END_ACTION|>"),
    "nemotron_v3": ("qwen3_coder", "nemotron_v3", f"<think>{PROSE}</think>{PROSE}<tool_call>\n<function=write_file>\n<parameter=path>\n"
                    f"src/app.py\n</parameter>\n<parameter=content>\n{BODY}\n</parameter>\n</function>\n</tool_call>"),
    # Pythonic output is the call list itself (Llama 3.2/4 start their reply with it).
    "pythonic": ("pythonic", None, f"[write_file(path='src/app.py', content={BODY!r})]" + " " * len(PROSE)),
    "none (content only)": (None, None, PROSE * 2),
}

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]


def per_chunk_us(tool_parser: str | None, reasoning_parser: str | None, text: str, repeats: int) -> float:
    chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
    runs = []
    for _ in range(repeats):
        parser = make_output_parser(tool_parser=tool_parser, reasoning_parser=reasoning_parser, tools=TOOLS)
        events = []
        start = time.perf_counter()
        for chunk in chunks:
            events += parser.feed(chunk)
        events += parser.finish()
        runs.append((time.perf_counter() - start) / len(chunks))
    calls = [e.arguments for e in events if isinstance(e, ToolCallEnd)]
    if tool_parser is not None and calls != [ARGS]:
        raise AssertionError(f"{tool_parser} did not parse the call: {calls!r}")  # a fast wrong parser proves nothing
    return 1e6 * statistics.median(runs)


def decode_step_ms(size: str) -> float:
    """One batch-1 decode step of a random qwen3 model of this size (mlx-lm BatchGenerator)."""
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.utils import load_model

    from router.bench.models import make_model

    with tempfile.TemporaryDirectory() as tmp:
        model, _ = load_model(make_model(Path(tmp) / "m", size=size))
    generator = BatchGenerator(model, completion_batch_size=1)
    generator.insert([list(range(3, 67))], max_tokens=[400])
    steps, start = 0, None
    while True:
        _, responses = generator.next()
        if responses and start is None:
            start = time.perf_counter()  # time decode steps only, not the prefill
        elif responses:
            steps += 1
        if any(r.finish_reason for r in responses):
            break
    return 1000 * (time.perf_counter() - start) / steps


def parser_cost_report(size: str, repeats: int = 5) -> str:
    """The markdown table of per-chunk cost for every family, against one decode step."""
    step_ms = decode_step_ms(size)
    lines = [f"baseline: one batch-1 decode step of a qwen3 model of size {size}: {step_ms:.2f} ms", "",
             "| family | output chars | µs per 4-char chunk | share of a decode step |", "|---|---|---|---|"]
    for family, (tool, reasoning, text) in FAMILIES.items():
        us = per_chunk_us(tool, reasoning, text, repeats)
        lines.append(f"| {family} | {len(text)} | {us:.1f} | {100 * us / (1000 * step_ms):.3f}% |")
    return "\n".join(lines) + "\n"


# One checkout's parsers timed on the texts given on stdin. Only ``parsers`` comes from that
# checkout, so both sides of a comparison run the same texts through the same loop.
_MEASURE_CHECKOUT = """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from parsers import make_output_parser
job = json.load(sys.stdin)
out = {}
for name, (tool, reasoning, text) in job["families"].items():
    chunks = [text[i : i + job["chunk"]] for i in range(0, len(text), job["chunk"])]
    runs = []
    for _ in range(job["repeats"]):
        try:
            parser = make_output_parser(tool_parser=tool, reasoning_parser=reasoning, tools=job["tools"])
        except ValueError:  # a parser that checkout does not have
            break
        start = time.perf_counter()
        for chunk in chunks:
            parser.feed(chunk)
        parser.finish()
        runs.append((time.perf_counter() - start) / len(chunks))
    out[name] = 1e6 * statistics.median(runs) if runs else None
print(json.dumps(out))
"""


def checkout_costs(checkout: Path, repeats: int) -> dict[str, float | None]:
    """µs per chunk of every family with ``checkout``'s parsers (None: it lacks the parser)."""
    job = {"families": FAMILIES, "chunk": CHUNK, "repeats": repeats, "tools": TOOLS}
    done = subprocess.run([sys.executable, "-c", _MEASURE_CHECKOUT, str(checkout)], input=json.dumps(job),
                          capture_output=True, text=True, check=True, cwd=checkout)
    return json.loads(done.stdout)


def against_report(other: Path, rounds: int = 6, repeats: int = 5) -> str:
    """This checkout's parsers against another's (e.g. a ``git worktree`` of an older commit),
    alternating which goes first round by round; medians, and the median of per-round ratios."""
    here = Path(__file__).resolve().parents[2]
    sides: dict[str, list[dict[str, float | None]]] = {"other": [], "here": []}
    for number in range(rounds):
        order = [("other", other), ("here", here)] if number % 2 == 0 else [("here", here), ("other", other)]
        for side, checkout in order:
            sides[side].append(checkout_costs(checkout, repeats))
    lines = [f"this checkout ({here}) against {other}: {rounds} rounds alternating, µs per {CHUNK}-char chunk", "",
             "| family | other (median) | this (median) | this / other (median of rounds) |", "|---|---|---|---|"]
    for family in FAMILIES:
        before = [run[family] for run in sides["other"]]
        after = [run[family] for run in sides["here"]]
        if None in before:
            lines.append(f"| {family} | – (no such parser) | {statistics.median(after):.1f} | – |")
            continue
        ratio = statistics.median(a / b for a, b in zip(after, before))
        lines.append(f"| {family} | {statistics.median(before):.1f} | {statistics.median(after):.1f} | {ratio:.2f} |")
    return "\n".join(lines) + "\n"
