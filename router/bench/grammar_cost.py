"""``rapid-mlx bench grammar``: what constrained decoding costs the worker per step, and what a
tool set costs to compile.

In process, on one random-weight checkpoint (``bench make-model``, whose tokenizer llguidance
reads): two of the worker's schedulers, one with N free sequences and one with the same N each
under a JSON schema grammar (an array of at least 40 objects, so no sequence can finish early),
take turns in blocks of ``BLOCK_STEPS`` decode steps, which one goes first alternating; each
block's first step is not timed (it finds the work the other left running). Interleaved this
finely, load from outside the bench falls on both alike. Per round: the median decode step of
each. Then the grammar of ``tool_choice: required`` over a 12-tool coding-agent set, built as the
router builds it and compiled as the worker compiles it (first time, then from the worker's
cache), with the time to the first mask; the router's part on a first turn (schema checks and
grammar) and on a later turn (its grammar cache).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from router.bench.step_cost import LAG_TOKENS, _prompts

ROW = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                                        "name": {"type": "string", "maxLength": 8}, "ok": {"type": "boolean"}},
       "required": ["id", "name", "ok"], "additionalProperties": False}
SCHEMA = {"type": "array", "items": ROW, "minItems": 40}
# Decode steps one scheduler runs before the other takes its turn (the first is not timed).
BLOCK_STEPS = 6


def _tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"The agent's {name} tool.", "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


_S, _I, _B = {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "boolean"}
AGENT_TOOLS = [
    _tool("read_file", {"path": _S, "offset": _I, "limit": _I}, ["path"]),
    _tool("write_file", {"path": _S, "content": _S}, ["path", "content"]),
    _tool("edit_file", {"path": _S, "old_string": _S, "new_string": _S, "replace_all": _B}, ["path", "old_string", "new_string"]),
    _tool("bash", {"command": _S, "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000}, "description": _S}, ["command"]),
    _tool("grep", {"pattern": _S, "path": _S, "glob": _S, "ignore_case": _B, "context": _I,
                   "output_mode": {"enum": ["content", "files_with_matches", "count"]}}, ["pattern"]),
    _tool("glob", {"pattern": _S, "path": _S}, ["pattern"]),
    _tool("list_dir", {"path": _S, "ignore": {"type": "array", "items": _S}}, ["path"]),
    _tool("web_fetch", {"url": {"type": "string", "format": "uri"}, "prompt": _S}, ["url", "prompt"]),
    _tool("todo_write", {"todos": {"type": "array", "items": {"type": "object", "properties": {
        "content": _S, "status": {"enum": ["pending", "in_progress", "completed"]}, "id": _S},
        "required": ["content", "status", "id"], "additionalProperties": False}}}, ["todos"]),
    _tool("task", {"description": _S, "prompt": _S, "subagent_type": {"enum": ["general", "explore", "review"]}},
          ["description", "prompt", "subagent_type"]),
    _tool("ask_user", {"question": _S, "options": {"type": "array", "items": _S, "maxItems": 4}}, ["question"]),
    _tool("search", {"query": _S, "limit": {"type": "integer", "minimum": 1, "maximum": 50}}, ["query"]),
]


@dataclass(frozen=True)
class MaskCost:
    sequences: int
    free_ms: list[float]  # per round
    constrained_ms: list[float]

    @property
    def ratios(self) -> list[float]:
        return [c / f for c, f in zip(self.constrained_ms, self.free_ms)]


def _scheduler(model, compiler, grammar: str | None, count: int, tokens: int):
    from engines.protocol import AddRequest, SamplingParams
    from engines.scheduler import Scheduler

    scheduler = Scheduler(model, max_concurrency=count, prefill_step=512, max_context=4096)
    for i, prompt in enumerate(_prompts(count)):
        request = AddRequest(f"r{i}", prompt, tokens, SamplingParams(temperature=0.0), [], grammar=grammar or "")
        scheduler.add(request, compiler.matcher(grammar) if grammar else None)
    return scheduler


def _decode_step_s(scheduler, count: int) -> float:
    start = time.perf_counter()
    produced = scheduler.step().outputs
    elapsed = time.perf_counter() - start
    if len(produced) != count or any(delta.finish_reason for delta in produced):
        raise RuntimeError("a sequence stopped decoding inside the timed steps: give them more tokens")
    return elapsed


def _paired_ms(model, compiler, grammar: str, count: int, steps: int) -> tuple[float, float]:
    """Median ms per decode step, free and constrained, the two schedulers taking turns (module docstring)."""
    blocks = -(-steps // (BLOCK_STEPS - 1))
    tokens = blocks * BLOCK_STEPS + LAG_TOKENS
    schedulers = [_scheduler(model, compiler, None, count, tokens), _scheduler(model, compiler, grammar, count, tokens)]
    timed: list[list[float]] = [[], []]
    try:
        for scheduler in schedulers:  # prefill until every sequence decodes
            while len(scheduler.step().outputs) < count:
                pass
        for block in range(2 * blocks):
            side = (block + block // 2) % 2  # free, constrained, constrained, free, free, ...
            steps_s = [_decode_step_s(schedulers[side], count) for _ in range(BLOCK_STEPS)]
            timed[side] += steps_s[1:]
    finally:
        for scheduler in schedulers:
            scheduler.close()
    return 1000 * statistics.median(timed[0]), 1000 * statistics.median(timed[1])


def measure(model_dir: Path | None, size: str, counts: list[int], steps: int, rounds: int) -> tuple[str, list[MaskCost], list[str]]:
    import llguidance
    from mlx_lm.utils import load_model
    from transformers import AutoTokenizer

    from engines.grammar import GrammarCompiler
    from engines.scheduler import model_vocab_size
    from router.bench.models import make_model, parameter_count
    from router.turn.structured import JSON_OPTIONS
    from router.turn.grammar_cache import GrammarCache

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model_dir) if model_dir else make_model(Path(tmp) / "m", size=size)
        described = f"{path.name if model_dir else size} ({parameter_count(path) / 1e6:.1f}M parameters)"
        model, _ = load_model(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        compiler = GrammarCompiler(path, vocab_size=model_vocab_size(model))
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps({**SCHEMA, "x-guidance": JSON_OPTIONS}))
        compile_lines = _compile_costs(compiler, tokenizer, GrammarCache())
        results = []
        for count in counts:
            _paired_ms(model, compiler, grammar, count, BLOCK_STEPS)  # warm up both paths at this width
            free, constrained = [], []
            for _ in range(rounds):
                free_ms, constrained_ms = _paired_ms(model, compiler, grammar, count, steps)
                free.append(free_ms)
                constrained.append(constrained_ms)
            results.append(MaskCost(count, free, constrained))
        compiler.close()
    return described, results, compile_lines


def _compile_costs(compiler, tokenizer, router_cache) -> list[str]:
    lines = []

    def build() -> str:
        return router_cache.tool_grammar(AGENT_TOOLS, mode="required", tool_parser="hermes", named=None, parallel=True,
                                         tokenizer=tokenizer, reasoning_parser="qwen3", thinking="maybe").grammar

    start = time.perf_counter()
    grammar = build()
    built = time.perf_counter() - start
    start = time.perf_counter()
    build()
    rebuilt = time.perf_counter() - start
    compiler.matcher('start: "warm"')  # the tokenizer is built once per worker: not the grammar's cost
    start = time.perf_counter()
    matcher = compiler.matcher(grammar)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    matcher.compute_bitmask()
    first_mask = time.perf_counter() - start
    start = time.perf_counter()
    compiler.matcher(grammar)
    cached = time.perf_counter() - start
    lines.append(f"12 coding-agent tools, `tool_choice: required`, Hermes format after a qwen3 think block "
                 f"({len(grammar)} bytes of grammar):")
    lines.append("")
    lines.append("| step | ms |")
    lines.append("|---|---|")
    for name, seconds in (("check the schemas, build the grammar (router, first turn)", built),
                          ("the same on a later turn (router cache)", rebuilt), ("compile it, first time (worker)", compiled),
                          ("first mask", first_mask), ("compile it again (worker cache)", cached)):
        lines.append(f"| {name} | {1000 * seconds:.2f} |")
    return lines


def apply_costs(vocab: int = 151_000, calls: int = 200) -> list[str]:
    """Applying one row's mask to MLX logits at a large vocabulary: a where() against -inf, and the
    additive finite bias ``GrammarMask`` uses (the mask's bits are random: the ops are dense)."""
    import mlx.core as mx
    import numpy as np

    from engines.grammar_mask import MASKED

    rng = np.random.default_rng(0)
    allowed = rng.integers(0, 2, vocab, dtype=np.uint8)
    logits = mx.random.normal((1, vocab))
    mx.eval(logits)
    ways = {"where(mask, logits, -inf)": lambda: mx.where(mx.array(allowed.astype(bool)), logits, -mx.inf),
            "logits + (mask - 1) * 1e30 (GrammarMask)": lambda: logits + (mx.array(allowed).astype(mx.float32) - 1.0) * MASKED,
            "no mask (logits * 1)": lambda: logits * 1.0}
    lines = [f"Applying one row's mask, vocabulary {vocab}, median of {calls} calls:", "", "| formulation | µs |", "|---|---|"]
    for name, apply in ways.items():
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            mx.eval(apply())
            times.append(time.perf_counter() - start)
        lines.append(f"| {name} | {1e6 * statistics.median(times):.0f} |")
    return lines


def report(described: str, results: list[MaskCost], compile_lines: list[str], steps: int) -> str:
    lines = [f"model {described}; {steps} decode steps timed per round and side, in turns of {BLOCK_STEPS - 1}, greedy; "
             "constrained: a JSON array of >= 40 objects", "",
             "| sequences | free ms/step, median (rounds) | constrained ms/step, median (rounds) | constrained / free (rounds) | median |",
             "|---|---|---|---|---|"]
    for cost in results:
        lines.append(f"| {cost.sequences} | {' '.join(f'{v:.2f}' for v in cost.free_ms)} | "
                     f"{' '.join(f'{v:.2f}' for v in cost.constrained_ms)} | {' '.join(f'{r:.3f}' for r in cost.ratios)} | "
                     f"**{statistics.median(cost.ratios):.3f}** |")
    return "\n".join([*lines, "", *compile_lines, "", *apply_costs()]) + "\n"
