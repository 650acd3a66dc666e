#!/usr/bin/env python3
"""llguidance against xgrammar, the two grammar engines on PyPI we could use for constrained
decoding (JSON-schema outputs and tool-call grammars applied as a per-sequence logits mask).

This is the record of that comparison. It runs in a scratch venv, never in the project's:

    python3 -m venv /tmp/xg-venv
    /tmp/xg-venv/bin/pip install "mlx[cpu]>=0.32.4,<0.33" transformers tokenizers numpy llguidance
    /tmp/xg-venv/bin/pip install torch==2.13.0     # first: the CPU build (see below)
    /tmp/xg-venv/bin/pip install xgrammar          # brings triton and apache-tvm-ffi
    /tmp/xg-venv/bin/python docs/compare-grammar-engines.py [--vocab N] [--rounds R]

(xgrammar requires torch; asked for by xgrammar alone, pip on Linux x86-64 takes PyPI's CUDA
build of several GB, hence the explicit CPU torch first.)

What it measures, for both engines, on the same inputs, the engines alternating round by round
(round r runs llguidance first when r is even, xgrammar first when odd), medians over rounds:

1. tokenizer setup: each engine's tokenizer info built from a Hugging Face tokenizer; two
   tokenizers: the demo model's (engines/demo/artifact, ~1k tokens) and a ~151k byte-level BPE
   (Qwen-sized) trained here offline on deterministic synthetic text and cached under /tmp;
2. grammar compile: a typical JSON schema, and a 12-tool coding-agent tool set as one grammar
   for a Qwen/Hermes `<tool_call>` block; also a new matcher from the compiled grammar and the
   first mask (llguidance builds its lexer lazily, xgrammar precomputes at compile time, so
   "compile + first mask" is the fair cold-start number);
3. per-step cost while driving each engine token by token through real valid outputs (mask,
   then accept the next token); applying a bitmask to MLX logits on the CPU backend; and the
   masks of a batch of 8 sequences, sequentially and with each engine's parallel API;
4. JSON-schema keyword support: each keyword compiled alone and checked against a valid and a
   violating document through the mask;
5. what each engine installs, its import time and memory.

A markdown report goes to stdout and /tmp/grammar-compare.md. OpenBLAS is preloaded for mlx
(the script re-executes itself with LD_PRELOAD set when the library exists).
"""

from __future__ import annotations

import os
import sys

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
if os.path.exists(OPENBLAS) and OPENBLAS not in os.environ.get("LD_PRELOAD", ""):
    env = dict(os.environ, LD_PRELOAD=(OPENBLAS + " " + os.environ.get("LD_PRELOAD", "")).strip())
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import argparse
import contextlib
import gc
import hashlib
import importlib.metadata as md
import json
import platform
import random
import re
import subprocess
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from statistics import median

import numpy as np

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning, module="transformers")

REPO = Path(__file__).resolve().parent.parent
DEMO_TOKENIZER = REPO / "engines" / "demo" / "artifact"
CACHE_DIR = Path("/tmp/grammar-compare")
REPORT_PATH = Path("/tmp/grammar-compare.md")
EOS = "<|im_end|>"


# ---------------------------------------------------------------------------------------------
# Inputs: one JSON schema, twelve tools, valid outputs for both
# ---------------------------------------------------------------------------------------------

# A typical structured-output schema: nested objects, arrays of objects, enums, bounded numbers,
# a nullable field, required and optional fields. additionalProperties is false everywhere, so
# both engines constrain the same language (xgrammar's default strict mode forbids extra keys,
# llguidance follows the spec and allows them when the keyword is absent).
BUG_REPORT_SCHEMA = {
    "title": "BugReport",
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 5, "maxLength": 120},
        "severity": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
        "component": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "affected_versions": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 10},
        "reporter": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "email": {"type": "string"},
                "is_maintainer": {"type": "boolean"},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "order": {"type": "integer", "minimum": 1, "maximum": 100},
                    "action": {"type": "string"},
                    "expected": {"type": "string"},
                },
                "required": ["order", "action"],
                "additionalProperties": False,
            },
            "minItems": 1,
        },
        "labels": {
            "type": "array",
            "items": {"type": "string", "enum": ["bug", "regression", "performance", "security", "docs", "ui"]},
        },
        "duplicate_of": {"type": ["integer", "null"]},
        "environment": {
            "type": "object",
            "properties": {
                "os": {"type": "string", "enum": ["linux", "macos", "windows"]},
                "memory_gb": {"type": "integer", "minimum": 1, "maximum": 1024},
                "python": {"type": "string"},
            },
            "additionalProperties": False,
        },
    },
    "required": ["title", "severity", "confidence", "reporter", "steps"],
    "additionalProperties": False,
}


def bug_reports(n: int) -> list[dict]:
    """n valid BugReport documents (deterministic variations of one realistic report)."""
    rng = random.Random(7)
    components = ["scheduler", "prefix cache", "tool parser", "streaming", "config loader", "metrics"]
    actions = [
        ("Start the router with two models", "Both models load"),
        ("Send a chat request with stream=true", "Chunks arrive as they are generated"),
        ("Cancel the request after the first chunk", "The sequence is freed"),
        ("Send the same prompt again", "The prefix cache is hit"),
        ("Reload the config with a new alias", "The alias answers without a restart"),
    ]
    docs = []
    for i in range(n):
        steps = [
            {"order": k + 1, "action": a, **({"expected": e} if (k + i) % 2 == 0 else {})}
            for k, (a, e) in enumerate(actions[: 2 + (i % 4)])
        ]
        doc = {
            "title": f"{components[i % len(components)].capitalize()} stalls after a cancelled stream (#{100 + i})",
            "severity": ["low", "medium", "high", "critical"][i % 4],
            "component": components[i % len(components)],
            "confidence": round(rng.uniform(0.5, 0.99), 2),
            "affected_versions": [f"0.{i % 3 + 1}.{k}" for k in range(1 + i % 3)],
            "reporter": {"name": ["Ada Lovelace", "Linus", "Grace Hopper", "Ken"][i % 4],
                         "email": f"dev{i}@example.com", "is_maintainer": i % 2 == 0},
            "steps": steps,
            "labels": [["bug", "regression"], ["performance"], ["bug", "ui", "docs"], ["security"]][i % 4],
            "duplicate_of": None if i % 3 else 42 + i,
            "environment": {"os": ["linux", "macos"][i % 2], "memory_gb": [16, 24, 64, 128][i % 4],
                            "python": "3.11.7"},
        }
        docs.append(doc)
    return docs


def _obj(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_STR = {"type": "string"}
# A coding agent's tool set, in the OpenAI "function" shape (name, description, parameters).
TOOLS = [
    {"name": "read_file", "description": "Read a file from the local filesystem.", "parameters": _obj({
        "path": {"type": "string", "description": "Absolute path of the file"},
        "offset": {"type": "integer", "minimum": 0, "description": "First line to read (0-based)"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 2000, "description": "Number of lines"},
    }, ["path"])},
    {"name": "write_file", "description": "Write a file, replacing any existing content.", "parameters": _obj({
        "path": {"type": "string"}, "content": {"type": "string"},
    }, ["path", "content"])},
    {"name": "edit_file", "description": "Replace an exact string in a file.", "parameters": _obj({
        "path": {"type": "string"},
        "old_string": {"type": "string", "description": "Text to replace; must occur exactly once unless replace_all"},
        "new_string": {"type": "string", "description": "Replacement text"},
        "replace_all": {"type": "boolean"},
    }, ["path", "old_string", "new_string"])},
    {"name": "bash", "description": "Run a shell command.", "parameters": _obj({
        "command": {"type": "string"},
        "timeout": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Seconds"},
        "description": {"type": "string", "maxLength": 200},
        "run_in_background": {"type": "boolean"},
    }, ["command"])},
    {"name": "grep", "description": "Search file contents with a regular expression.", "parameters": _obj({
        "pattern": {"type": "string"},
        "path": {"type": "string"},
        "glob": {"type": "string"},
        "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
        "case_insensitive": {"type": "boolean"},
        "line_numbers": {"type": "boolean"},
        "context_lines": {"type": "integer", "minimum": 0, "maximum": 20},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 1000},
        "multiline": {"type": "boolean"},
    }, ["pattern"])},
    {"name": "glob", "description": "Find files by glob pattern.", "parameters": _obj({
        "pattern": {"type": "string"}, "path": {"type": "string"},
    }, ["pattern"])},
    {"name": "list_dir", "description": "List a directory.", "parameters": _obj({
        "path": {"type": "string"},
        "ignore": {"type": "array", "items": _STR},
        "max_depth": {"type": "integer", "minimum": 1, "maximum": 10},
    }, ["path"])},
    {"name": "web_fetch", "description": "Fetch a URL and answer a prompt about it.", "parameters": _obj({
        "url": {"type": "string", "description": "Fully qualified URL"},
        "prompt": {"type": "string"},
    }, ["url", "prompt"])},
    {"name": "todo_write", "description": "Replace the session's todo list.", "parameters": _obj({
        "todos": {"type": "array", "minItems": 1, "items": _obj({
            "id": {"type": "string"},
            "content": {"type": "string", "minLength": 1},
            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
            "priority": {"type": "string", "enum": ["high", "medium", "low"]},
        }, ["id", "content", "status"])},
    }, ["todos"])},
    {"name": "task", "description": "Start a sub-agent on a task.", "parameters": _obj({
        "description": {"type": "string", "maxLength": 80},
        "prompt": {"type": "string"},
        "subagent_type": {"type": "string", "enum": ["general-purpose", "explore", "plan", "code-reviewer", "test-runner"]},
    }, ["description", "prompt", "subagent_type"])},
    {"name": "ask_user", "description": "Ask the user a question.", "parameters": _obj({
        "question": {"type": "string"},
        "options": {"type": "array", "items": _STR, "maxItems": 4},
        "multi_select": {"type": "boolean"},
    }, ["question"])},
    {"name": "search", "description": "Search the web.", "parameters": _obj({
        "query": {"type": "string", "minLength": 2},
        "allowed_domains": {"type": "array", "items": _STR},
        "blocked_domains": {"type": "array", "items": _STR},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 20},
    }, ["query"])},
]

# One realistic call of every tool (arguments in schema order, as both engines require).
TOOL_CALLS = [
    ("read_file", {"path": "/work/main/router/scheduler.py", "offset": 120, "limit": 80}),
    ("write_file", {"path": "/tmp/notes.md", "content": "# Notes\n\n- prefix cache hit rate drops after reload\n- check `key_changes`\n"}),
    ("edit_file", {"path": "/work/main/router/config.py",
                   "old_string": "def load_config(path):\n    text = path.read_text()\n",
                   "new_string": "def load_config(path: Path) -> Config:\n    text = read_config_text(path)\n"}),
    ("bash", {"command": "cd /work/main && python -m pytest tests/test_scheduler.py -x -q 2>&1 | tail -20",
              "timeout": 300, "description": "Run the scheduler tests"}),
    ("grep", {"pattern": "def (load|read)_config", "path": "/work/main", "glob": "*.py",
              "output_mode": "content", "line_numbers": True, "context_lines": 2}),
    ("glob", {"pattern": "**/*_parser.py", "path": "/work/main/parsers"}),
    ("list_dir", {"path": "/work/main/engines", "ignore": ["__pycache__", "*.pyc"], "max_depth": 2}),
    ("web_fetch", {"url": "https://ml-explore.github.io/mlx/build/html/index.html",
                   "prompt": "Which functions create arrays from NumPy buffers?"}),
    ("todo_write", {"todos": [
        {"id": "1", "content": "Reproduce the stalled stream", "status": "completed", "priority": "high"},
        {"id": "2", "content": "Write a failing test", "status": "in_progress", "priority": "high"},
        {"id": "3", "content": "Fix the scheduler's cancel path", "status": "pending"}]}),
    ("task", {"description": "Review the cache eviction change",
              "prompt": "Read caches/prefix.py and list any path where an evicted block can still be referenced.",
              "subagent_type": "code-reviewer"}),
    ("ask_user", {"question": "Should the reload keep in-flight requests on the old model?",
                  "options": ["Keep them", "Cancel them"], "multi_select": False}),
    ("search", {"query": "mlx metal kernel bitmask logits", "allowed_domains": ["github.com"], "max_results": 5}),
]


def tool_call_text(name: str, arguments: dict) -> str:
    """Qwen/Hermes tool-call format, as the demo model's chat template renders it."""
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


# ---------------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------------

# Qwen2's pre-tokenization regex, so the large vocabulary splits text the way a real one does.
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>"]  # added, non-special (as Qwen)


def synthetic_corpus(vocab: int, seed: int = 0) -> list[str]:
    """Deterministic text with the mix a real vocabulary is trained on: Zipf-distributed words
    from a large syllable lexicon (so merges become whole words), code, JSON, paths, URLs,
    dates, indentation runs, CJK, Cyrillic and accented words. Sized to yield `vocab` merges."""
    rng = random.Random(seed)
    cons = "b c d f g h j k l m n p r s t v w z ch sh th st tr pl br gr".split()
    vows = "a e i o u ai ea ou io y ee oo".split()
    sylls = [c + v for c in cons for v in vows] + vows + [v + c for v in vows for c in "n r s t l m".split()]
    lexicon, seen = [], set()
    while len(lexicon) < max(50_000, 5 * vocab):
        w = "".join(rng.choice(sylls) for _ in range(rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 5])))
        if w not in seen:
            seen.add(w)
            lexicon.append(w)
    foreign = ["".join(chr(rng.randint(0x4E00, 0x4E00 + 3000)) for _ in range(rng.randint(1, 4))) for _ in range(20000)]
    foreign += ["".join(chr(rng.randint(0x430, 0x44F)) for _ in range(rng.randint(2, 9))) for _ in range(20000)]
    foreign += ["".join(rng.choice("áéíóúñçàèüößøåabcdefghijklmnoprst") for _ in range(rng.randint(3, 9))) for _ in range(10000)]

    def word() -> str:
        return lexicon[min(int(rng.paretovariate(0.6)) - 1, len(lexicon) - 1)]

    lines = []
    for _ in range(max(20_000, 2 * vocab)):
        kind = rng.random()
        if kind < 0.5:
            ws = [word() for _ in range(rng.randint(5, 20))]
            lines.append(" ".join(ws).capitalize() + rng.choice([".", ",", "?", "!", ":", ";"]))
        elif kind < 0.7:
            ind, a, b = " " * rng.choice([0, 2, 4, 8, 12, 16]), word(), word()
            lines.append(rng.choice([
                f"{ind}def {a}_{b}(self, {word()}: int = {rng.randint(0, 999)}) -> str:",
                f"{ind}const {a}{b.capitalize()} = await fetch(`/api/{word()}/${{id}}`);",
                f"{ind}if ({a} != null && {b}.length > {rng.randint(0, 99)}) {{ return {word()}[i]; }}",
                f"{ind}{a}.{b}({word()}, {rng.random():.4f})  # {word()} {word()}",
                f"{ind}import {a}.{b} as {word()}",
                f"{ind}for (let i = 0; i < {a}.size(); i++) {{",
            ]))
        elif kind < 0.85:
            d = {word(): rng.choice([word(), rng.randint(0, 10 ** rng.randint(1, 6)), True, None,
                                     [word(), word()], rng.random()]) for _ in range(rng.randint(1, 5))}
            lines.append(json.dumps(d, indent=rng.choice([None, 2, 4])))
        elif kind < 0.92:
            lines.append(" ".join(rng.choice(foreign) for _ in range(rng.randint(3, 10))))
        else:
            lines.append(rng.choice([
                f"/home/{word()}/{word()}/{word()}.py", f"https://{word()}.com/{word()}?q={word()}",
                f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z",
                f"{word()}@{word()}.org", "\t" * rng.randint(1, 4) + word(), "=" * rng.randint(2, 40)]))
    return lines


def large_tokenizer_file(vocab: int) -> Path:
    """Train (once; cached) a byte-level BPE of `vocab` tokens, Qwen-shaped: Qwen2 split regex,
    byte-level alphabet, ChatML special tokens, <tool_call>/<think> as added non-special tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    path = CACHE_DIR / f"bpe-{vocab}.json"
    if path.exists():
        return path
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(MARKUP_TOKENS), special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(synthetic_corpus(vocab), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    tok.save(str(path))
    return path


def load_tokenizers(vocab: int) -> list[tuple[str, object]]:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    demo = AutoTokenizer.from_pretrained(str(DEMO_TOKENIZER))
    big_path = large_tokenizer_file(vocab)
    big = PreTrainedTokenizerFast(tokenizer_file=str(big_path), eos_token=EOS, pad_token="<|endoftext|>")
    return [(f"demo ({len(demo)})", demo), (f"BPE ({len(big)})", big)]


# ---------------------------------------------------------------------------------------------
# Engine adapters: the same small interface over both libraries
# ---------------------------------------------------------------------------------------------

def alloc_bitmask(batch: int, vocab: int) -> np.ndarray:
    """Both engines write the same layout: int32 words, bit j of word w is token 32*w + j."""
    return np.full((batch, (vocab + 31) // 32), -1, dtype=np.int32)


def allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


@contextlib.contextmanager
def captured_stderr(sink: list[str]):
    """Capture what native code prints on fd 2 (xgrammar logs keyword warnings there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace").strip()
            if text:
                sink.append(text)


class Llguidance:
    name = "llguidance"

    def __init__(self):
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.lib, self.hf, self.np = llguidance, llguidance.hf, llguidance.numpy
        self.version = llguidance.__version__
        self.executor = llguidance.LLExecutor(num_threads=2)  # both parallel APIs get 2 threads

    def tokenizer(self, hf_tok):
        return self.hf.from_tokenizer(hf_tok, n_vocab=len(hf_tok))

    def _compile(self, ctx, grammar: str):
        m = self.lib.LLMatcher(ctx, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m  # the compiled grammar is a fresh matcher; new matchers are deep copies of it

    def compile_json(self, ctx, schema: dict):
        return self._compile(ctx, self.lib.LLMatcher.grammar_from_json_schema(schema))

    def compile_tools(self, ctx, tools: list[dict]):
        # Idiomatic llguidance (its docs/toolcalls.md, Qwen-3 example): Lark with the markers as
        # token references and one %json per tool, {"name": const, "arguments": parameters}.
        rules = [f"start: <tool_call> \"\\n\" ({' | '.join(f'f{i}' for i in range(len(tools)))}) \"\\n\" </tool_call>"]
        for i, t in enumerate(tools):
            call = _obj({"name": {"const": t["name"]}, "arguments": t["parameters"]}, ["name", "arguments"])
            rules.append(f"f{i}: %json {json.dumps(call)}")
        return self._compile(ctx, self.lib.LLMatcher.grammar_from_lark("\n".join(rules)))

    def warnings(self, compiled) -> list[str]:
        return list(compiled.get_grammar_warnings())

    def matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, m, bitmask, row=0):
        self.np.fill_next_token_bitmask(m, bitmask, row)

    def accept(self, m, token) -> bool:
        return m.consume_token(token)

    def reset(self, m):
        m.reset()

    def batch_fill(self, matchers, bitmask):
        self.np.fill_next_token_bitmask_par(self.executor, [(m, i) for i, m in enumerate(matchers)], bitmask)

    def batch_accept(self, matchers, tokens) -> list[bool]:
        return self.executor.consume_token_par(list(zip(matchers, tokens)))


class Xgrammar:
    name = "xgrammar"

    def __init__(self):
        import xgrammar

        self.xgr = xgrammar
        self.version = md.version("xgrammar")
        self.batch = xgrammar.BatchGrammarMatcher(max_threads=2)  # "auto" would be cores/2 = 1 here

    def tokenizer(self, hf_tok):
        return self.xgr.TokenizerInfo.from_huggingface(hf_tok, vocab_size=len(hf_tok))

    def _compiler(self, ctx):
        # A fresh compiler with its cache off, so every compile is a real one (default threads: 8).
        return self.xgr.GrammarCompiler(ctx, cache_enabled=False)

    def compile_json(self, ctx, schema: dict):
        return self._compiler(ctx).compile_json_schema(schema)

    def compile_tools(self, ctx, tools: list[dict]):
        # Idiomatic xgrammar: a structural tag, shaped as its own qwen_3 builtin with
        # token_markers (marker tokens, then one tag per tool whose content is the JSON schema).
        tags = [{"type": "tag", "begin": f'\n{{"name": "{t["name"]}", "arguments": ',
                 "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": "}\n"} for t in tools]
        tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
            {"type": "token", "token": "<tool_call>"},
            {"type": "or", "elements": tags},
            {"type": "token", "token": "</tool_call>"},
        ]}}
        return self._compiler(ctx).compile_structural_tag(tag)

    def warnings(self, compiled) -> list[str]:
        return []

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m, bitmask, row=0):
        m.fill_next_token_bitmask(bitmask, row)  # numpy arrays pass through DLPack

    def accept(self, m, token) -> bool:
        return m.accept_token(token)

    def reset(self, m):
        m.reset()

    def batch_fill(self, matchers, bitmask):
        self.batch.batch_fill_next_token_bitmask(matchers, bitmask)

    def batch_accept(self, matchers, tokens) -> list[bool]:
        return self.xgr.BatchGrammarMatcher.batch_accept_token(matchers, tokens)


def engine_order(engines: list, rnd: int) -> list:
    return engines if rnd % 2 == 0 else engines[::-1]


# ---------------------------------------------------------------------------------------------
# Measurement helpers
# ---------------------------------------------------------------------------------------------

def now() -> int:
    return time.perf_counter_ns()


def pct(values, q) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def canonical(row: np.ndarray, vocab: int) -> np.ndarray:
    """The first `vocab` bits of a mask row as booleans (tail bits past the vocabulary ignored)."""
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab].astype(bool)


def fmt_spread(values, scale=1.0, digits=1) -> str:
    """median (min–max) of per-round values."""
    v = [x * scale for x in values]
    if len(v) == 1:
        return f"{v[0]:.{digits}f}"
    return f"{median(v):.{digits}f} ({min(v):.{digits}f}–{max(v):.{digits}f})"


def drive(engine, compiled, outputs: list[list[int]], vocab: int, eos: int, keep_masks=False) -> dict:
    """Drive fresh matchers through each token sequence: mask, check the next token is allowed,
    accept it; at the end one more mask, which must allow EOS. Times every mask and accept."""
    bitmask = alloc_bitmask(1, vocab)
    res = {"mask_ns": [], "accept_ns": [], "new_matcher_ns": [], "first_mask_ns": [], "allowed": [],
           "masks": [], "failures": []}
    gc.collect()
    gc.disable()
    try:
        for k, ids in enumerate(outputs):
            t0 = now()
            m = engine.matcher(compiled)
            res["new_matcher_ns"].append(now() - t0)
            for step, tok in enumerate([*ids, None]):
                t0 = now()
                engine.fill(m, bitmask, 0)
                dt = now() - t0
                res["mask_ns"].append(dt)
                if step == 0:
                    res["first_mask_ns"].append(dt)
                if keep_masks:
                    c = canonical(bitmask[0], vocab)
                    res["allowed"].append(int(c.sum()))
                    res["masks"].append(c)
                if tok is None:
                    if not allowed(bitmask[0], eos):
                        res["failures"].append(f"output {k}: EOS not allowed at the end")
                    break
                if not allowed(bitmask[0], tok):
                    res["failures"].append(f"output {k}: token {step} ({tok}) masked out")
                    break
                t0 = now()
                ok = engine.accept(m, tok)
                res["accept_ns"].append(now() - t0)
                if not ok:
                    res["failures"].append(f"output {k}: token {step} ({tok}) not accepted")
                    break
    finally:
        gc.enable()
    return res


# ---------------------------------------------------------------------------------------------
# 1-3. Timings
# ---------------------------------------------------------------------------------------------

def measure_tokenizer_setup(engines, tokenizers, rounds: int) -> dict:
    out = {(t, e.name): [] for t, _ in tokenizers for e in engines}
    for rnd in range(rounds):
        for tname, hf_tok in tokenizers:
            for e in engine_order(engines, rnd):
                gc.collect()
                t0 = now()
                e.tokenizer(hf_tok)
                out[(tname, e.name)].append((now() - t0) / 1e6)
    return out


def grammar_inputs(hf_tok) -> dict:
    """Per grammar: how to compile it and the token sequences of its valid outputs."""
    enc = lambda s: hf_tok.encode(s, add_special_tokens=False)  # noqa: E731
    return {
        "JSON schema": {
            "compile": lambda e, ctx: e.compile_json(ctx, BUG_REPORT_SCHEMA),
            "outputs": [enc(json.dumps(d)) for d in bug_reports(1)],
            "batch": [enc(json.dumps(d)) for d in bug_reports(8)],
        },
        "12 tools": {
            "compile": lambda e, ctx: e.compile_tools(ctx, TOOLS),
            "outputs": [enc(tool_call_text(n, a)) for n, a in TOOL_CALLS],
            "batch": [enc(tool_call_text(n, a)) for n, a in TOOL_CALLS[:8]],
        },
    }


def measure_steps(engines, tokenizers, rounds: int) -> tuple[dict, dict]:
    """Compile, then drive through every valid output; every round compiles afresh."""
    stats, cross = {}, {}
    for tname, hf_tok in tokenizers:
        vocab, eos = len(hf_tok), hf_tok.convert_tokens_to_ids(EOS)
        ctxs = {e.name: e.tokenizer(hf_tok) for e in engines}
        for e in engines:  # one-time process warm-up (thread pools, lazy statics), not measured
            e.fill(e.matcher(e.compile_json(ctxs[e.name], {"type": "integer"})), alloc_bitmask(1, vocab))
        for gname, g in grammar_inputs(hf_tok).items():
            per = {e.name: {"compile": [], "new_matcher": [], "first_mask": [], "cold": [], "median": [],
                            "p95": [], "max": [], "accept": [], "total": [], "failures": set(), "steps": 0,
                            "allowed": []} for e in engines}
            masks0 = {}
            for rnd in range(rounds):
                for e in engine_order(engines, rnd):
                    gc.collect()
                    t0 = now()
                    compiled = g["compile"](e, ctxs[e.name])
                    compile_ms = (now() - t0) / 1e6
                    r = drive(e, compiled, g["outputs"], vocab, eos, keep_masks=(rnd == 0))
                    p = per[e.name]
                    p["compile"].append(compile_ms)
                    p["new_matcher"].append(median(r["new_matcher_ns"]) / 1e3)
                    p["first_mask"].append(r["first_mask_ns"][0] / 1e3)
                    p["cold"].append(compile_ms + r["first_mask_ns"][0] / 1e6)
                    p["median"].append(median(r["mask_ns"]) / 1e3)
                    p["p95"].append(pct(r["mask_ns"], 95) / 1e3)
                    p["max"].append(max(r["mask_ns"]) / 1e3)
                    p["accept"].append(median(r["accept_ns"]) / 1e3 if r["accept_ns"] else float("nan"))
                    p["total"].append(sum(r["mask_ns"]) / 1e6 / len(g["outputs"]))
                    p["failures"].update(r["failures"])
                    p["steps"] = len(r["mask_ns"])
                    if rnd == 0:
                        p["allowed"] = r["allowed"]
                        masks0[e.name] = r["masks"]
            stats[(tname, gname)] = per
            cross[(tname, gname)] = compare_masks(masks0, hf_tok)
    return stats, cross


def compare_masks(masks: dict, hf_tok) -> dict:
    """Both engines walked the same steps: how often are their masks identical, and which
    tokens does one allow that the other masks out (counted in steps, most frequent first)?"""
    a, b = masks.get("llguidance", []), masks.get("xgrammar", [])
    n = min(len(a), len(b))
    same, only = 0, {"llguidance": Counter(), "xgrammar": Counter()}
    for i in range(n):
        if np.array_equal(a[i], b[i]):
            same += 1
            continue
        only["llguidance"].update(np.flatnonzero(a[i] & ~b[i]).tolist())
        only["xgrammar"].update(np.flatnonzero(b[i] & ~a[i]).tolist())
    top = {k: [f"{code(hf_tok.decode([t]))} ({c})" for t, c in v.most_common(6)] for k, v in only.items()}
    return {"steps": n, "same": same, "top": top, "distinct": {k: len(v) for k, v in only.items()}}


def measure_batch(engines, tokenizers, rounds: int, steps: int) -> dict:
    """Eight sequences in lockstep (each restarts its output when done). Pass "seq" fills the
    eight mask rows one matcher after another and accepts one by one; pass "par" uses each
    engine's batch API. Each pass compiles afresh, so neither inherits the other's caches."""
    out = {}
    for tname, hf_tok in tokenizers:
        vocab = len(hf_tok)
        ctxs = {e.name: e.tokenizer(hf_tok) for e in engines}
        for gname, g in grammar_inputs(hf_tok).items():
            seqs = g["batch"]
            res = {(e.name, mode, what): [] for e in engines for mode in ("seq", "par") for what in ("fill", "accept")}
            for rnd in range(rounds):
                for e in engine_order(engines, rnd):
                    for mode in ("seq", "par") if rnd % 2 == 0 else ("par", "seq"):
                        compiled = g["compile"](e, ctxs[e.name])
                        ms = [e.matcher(compiled) for _ in seqs]
                        pos = [0] * len(seqs)
                        bitmask = alloc_bitmask(len(seqs), vocab)
                        fills, accepts = [], []
                        gc.collect()
                        gc.disable()
                        try:
                            for _ in range(steps):
                                toks = [s[p] for s, p in zip(seqs, pos)]
                                t0 = now()
                                if mode == "seq":
                                    for i, m in enumerate(ms):
                                        e.fill(m, bitmask, i)
                                else:
                                    e.batch_fill(ms, bitmask)
                                t1 = now()
                                if mode == "seq":
                                    oks = [e.accept(m, t) for m, t in zip(ms, toks)]
                                else:
                                    oks = e.batch_accept(ms, toks)
                                t2 = now()
                                assert all(oks), f"{e.name} {mode}: batch token rejected"
                                assert all(allowed(bitmask[i], t) for i, t in enumerate(toks))
                                fills.append(t1 - t0)
                                accepts.append(t2 - t1)
                                for i in range(len(seqs)):
                                    pos[i] += 1
                                    if pos[i] == len(seqs[i]):  # output done: start it again
                                        e.reset(ms[i])
                                        pos[i] = 0
                        finally:
                            gc.enable()
                        res[(e.name, mode, "fill")].append(median(fills) / 1e3)
                        res[(e.name, mode, "accept")].append(median(accepts) / 1e3)
            out[(tname, gname)] = res
    return out


def measure_mlx_apply(vocabs: list[int], rounds: int, iters: int = 200) -> dict:
    """Bitmask -> logits on MLX's CPU backend, written in plain mlx ops (llguidance.mlx and
    xgrammar's MLX kernel target Metal or are compiled for it; these run anywhere). The
    timed call includes the numpy -> mx.array copy of the mask and mx.eval of the result."""
    import mlx.core as mx

    shifts = mx.arange(32, dtype=mx.int32)

    def apply_shift(logits, bm):
        # Expand each int32 word to its 32 bits (arithmetic shift then &1 is right for negative
        # words too), trim to the vocabulary, select -inf where the bit is 0.
        bits = mx.right_shift(bm[:, :, None], shifts) & 1
        keep = bits.reshape(bm.shape[0], -1)[:, : logits.shape[-1]].astype(mx.bool_)
        return mx.where(keep, logits, mx.array(-float("inf"), dtype=logits.dtype))

    # The other classic formulation: view the mask as bytes and gather 8 additive biases per byte.
    lut = mx.array([[0.0 if (b >> j) & 1 else -float("inf") for j in range(8)] for b in range(256)],
                   dtype=mx.float32)

    def apply_lut(logits, bm):
        bias = lut[bm.view(mx.uint8)].reshape(bm.shape[0], -1)[:, : logits.shape[-1]]
        return logits + bias

    variants = {"shift + where": apply_shift, "shift + where, mx.compile": mx.compile(apply_shift),
                "byte LUT + add": apply_lut}
    rng = np.random.default_rng(0)
    out = {}
    for vocab in vocabs:
        for batch in (1, 8):
            logits = mx.array(rng.standard_normal((batch, vocab), dtype=np.float32))
            mask_np = rng.integers(-2**31, 2**31, size=(batch, (vocab + 31) // 32), dtype=np.int64).astype(np.int32)
            expect = int(batch * vocab - sum(canonical(mask_np[i], vocab).sum() for i in range(batch)))
            mx.eval(logits)
            for name, fn in variants.items():
                got = fn(logits, mx.array(mask_np))
                n_inf = int(mx.sum(mx.isinf(got)).item())
                assert n_inf == expect, (name, n_inf, expect)
                per_round = []
                for _ in range(rounds):
                    ts = []
                    for _ in range(iters):
                        t0 = now()
                        mx.eval(fn(logits, mx.array(mask_np)))
                        ts.append(now() - t0)
                    per_round.append(median(ts) / 1e3)
                out[(vocab, batch, name)] = per_round
            # For scale: the same-sized elementwise op with no mask at all.
            ts = []
            for _ in range(iters):
                t0 = now()
                mx.eval(logits * 1.0)
                ts.append(now() - t0)
            out[(vocab, batch, "(no mask: logits * 1.0)")] = [median(ts) / 1e3]
    return out


# ---------------------------------------------------------------------------------------------
# 4. JSON-schema keyword support
# ---------------------------------------------------------------------------------------------

_I = {"type": "integer"}
# (feature, schema, valid document, violating documents). A document is accepted when the mask
# allows each of its tokens in turn and then EOS.
FEATURES = [
    ("type union", {"type": ["string", "null"]}, 'null', ['1']),
    ("enum", {"enum": ["red", "green", 3]}, '"green"', ['"blue"']),
    ("const", {"const": "fixed"}, '"fixed"', ['"other"']),
    ("anyOf", {"anyOf": [_I, {"type": "string", "maxLength": 3}]}, '"abc"', ['true', '"abcd"']),
    ("oneOf (disjoint branches)", {"oneOf": [_I, {"type": "string"}]}, '7', ['true']),
    ("oneOf (overlapping branches)", {"oneOf": [_I, {"type": "number", "minimum": 0}]}, '-3', ['5']),
    ("allOf", {"allOf": [_obj({"a": _I}, ["a"]) | {"additionalProperties": True},
                         {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     '{"a": 1, "b": "x"}', ['{"a": 1}']),
    ("$ref / $defs", {"$defs": {"pt": _obj({"x": _I}, ["x"])}, **_obj({"p": {"$ref": "#/$defs/pt"}}, ["p"])},
     '{"p": {"x": 1}}', ['{"p": {"x": "1"}}']),
    ("recursive $ref", {"$defs": {"node": _obj({"v": _I, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, ["v"])},
                        "$ref": "#/$defs/node"},
     '{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}', ['{"v": 1, "kids": [{"v": 2, "kids": [{"v": "x"}]}]}']),
    ("pattern", {"type": "string", "pattern": "^[a-z]{3}-[0-9]{2}$"}, '"abc-12"', ['"ABC-12"', '"abc-123"']),
    ("format: date-time", {"type": "string", "format": "date-time"}, '"2024-05-01T12:30:00Z"', ['"yesterday"']),
    ("format: email", {"type": "string", "format": "email"}, '"dev@example.com"', ['"not an email"']),
    ("format: uuid", {"type": "string", "format": "uuid"}, '"123e4567-e89b-12d3-a456-426614174000"', ['"1234"']),
    ("minLength / maxLength", {"type": "string", "minLength": 2, "maxLength": 4}, '"abc"', ['"a"', '"abcdef"']),
    ("minimum / maximum (integer)", {"type": "integer", "minimum": 10, "maximum": 20}, '15', ['25', '5']),
    ("minimum / maximum (number)", {"type": "number", "minimum": 0, "maximum": 1}, '0.25', ['1.5', '-0.5']),
    ("exclusiveMinimum", {"type": "number", "exclusiveMinimum": 0}, '0.5', ['0', '-1']),
    ("multipleOf", {"type": "integer", "multipleOf": 5}, '15', ['7']),
    ("minItems / maxItems", {"type": "array", "items": _I, "minItems": 2, "maxItems": 3}, '[1, 2]', ['[1]', '[1, 2, 3, 4]']),
    ("uniqueItems", {"type": "array", "items": _I, "uniqueItems": True}, '[1, 2]', ['[1, 1]']),
    ("prefixItems", {"type": "array", "prefixItems": [_I, {"type": "string"}], "items": False}, '[1, "a"]', ['["a", 1]']),
    ("additionalProperties: false", {"type": "object", "properties": {"a": _I}, "additionalProperties": False},
     '{"a": 1}', ['{"a": 1, "b": 2}']),
    ("additionalProperties: schema", {"type": "object", "additionalProperties": _I}, '{"x": 1, "y": 2}', ['{"x": "s"}']),
    ("patternProperties", {"type": "object", "patternProperties": {"^n_": _I}, "additionalProperties": False},
     '{"n_a": 1}', ['{"n_a": "s"}', '{"zz": 1}']),
    ("propertyNames", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": _I},
     '{"ab": 1}', ['{"AB": 1}']),
    ("if / then / else", {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "n": _I},
                          "required": ["kind", "n"], "additionalProperties": False,
                          "if": {"properties": {"kind": {"const": "a"}}},
                          "then": {"properties": {"n": {"minimum": 10}}}, "else": {"properties": {"n": {"maximum": 0}}}},
     '{"kind": "a", "n": 11}', ['{"kind": "a", "n": 1}']),
    ("not", {"type": "integer", "not": {"const": 3}}, '4', ['3']),
    ("dependentRequired", {"type": "object", "properties": {"card": {"type": "string"}, "cvv": {"type": "string"}},
                           "additionalProperties": False, "dependentRequired": {"card": ["cvv"]}},
     '{"card": "x", "cvv": "1"}', ['{"card": "x"}']),
    ("minProperties", {"type": "object", "properties": {"a": _I, "b": _I}, "additionalProperties": False,
                       "minProperties": 1}, '{"a": 1}', ['{}']),
    # Not keywords, but behaviours a router must know about:
    ("pattern unanchored (spec: search, not full match)", {"type": "string", "pattern": "[0-9]"}, '"ab1c"', ['"abc"']),
    ("string: raw control character (invalid JSON)", {"type": "string"}, '"a\\u0001b"', ['"a\x01b"']),
    ("maxLength string: escapes valid, raw control character not", {"type": "string", "maxLength": 10},
     '"a\\nb \\"c\\""', ['"a\x01b"']),
    ("string: ChatML special token inside (not JSON text)", {"type": "string"}, '"ab"', ['"a<|im_start|>b"']),
    ("required (some optional)", {"type": "object", "properties": {"a": _I, "b": _I}, "required": ["b"],
                                  "additionalProperties": False}, '{"b": 1}', ['{"a": 1}']),
    ("keys in another order than the schema's (valid per spec)", _obj({"a": _I, "b": _I}, ["a", "b"]),
     '{"b": 2, "a": 1}', []),
    ("additionalProperties absent (extra keys valid per spec)", {"type": "object", "properties": {"a": _I}},
     '{"a": 1, "extra": 2}', []),
]


def accepts(engine, compiled, ids: list[int], eos: int, vocab: int) -> bool:
    m, bm = engine.matcher(compiled), alloc_bitmask(1, vocab)
    for t in ids:
        engine.fill(m, bm, 0)
        if not allowed(bm[0], t) or not engine.accept(m, t):
            return False
    engine.fill(m, bm, 0)
    return allowed(bm[0], eos)


def check_features(engines, hf_tok) -> dict:
    """Compile each feature's schema alone (demo tokenizer, each engine's defaults), then walk
    the valid document and each violating one through the mask."""
    eos = hf_tok.convert_tokens_to_ids(EOS)
    out = {}
    for e in engines:
        ctx = e.tokenizer(hf_tok)
        for feat, schema, valid, invalids in FEATURES:
            logs: list[str] = []
            try:
                with warnings.catch_warnings(record=True) as pyw, captured_stderr(logs):
                    warnings.simplefilter("always")
                    compiled = e.compile_json(ctx, schema)
                logs += [str(w.message) for w in pyw] + e.warnings(compiled)
            except Exception as exc:  # noqa: BLE001 - the error message is the result
                msg = " ".join(str(exc).split())
                out[(feat, e.name)] = ("rejected", msg[:160] + ("…" if len(msg) > 160 else ""))
                continue
            enc = lambda s: hf_tok.encode(s, add_special_tokens=False)  # noqa: E731
            ok_valid = accepts(e, compiled, enc(valid), eos, len(hf_tok))
            leaked = [d for d in invalids if accepts(e, compiled, enc(d), eos, len(hf_tok))]
            # xgrammar's log lines start "[time] /path/file.cc:line: "; keep the message only.
            msgs = [re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", line) for log in logs for line in log.splitlines()]
            text = " ".join(" ".join(msgs).split())
            warn = f" — warns: {text[:200]}{'…' if len(text) > 200 else ''}" if text else ""
            allows = f"allows {', '.join(code(d) for d in leaked)}" if leaked else ""
            if not ok_valid:
                verdict = ("valid doc rejected", f"{code(valid)} is masked out" + (f"; {allows}" if allows else "") + warn)
            elif not invalids:
                verdict = ("accepted", f"{code(valid)} allowed" + warn)
            elif len(leaked) == len(invalids):
                verdict = ("silently ignored", allows + warn)
            elif leaked:
                verdict = ("partly enforced", allows + warn)
            else:
                verdict = ("supported", warn.lstrip(" —"))
            out[(feat, e.name)] = verdict
    return out


# ---------------------------------------------------------------------------------------------
# 5. Dependencies, import cost
# ---------------------------------------------------------------------------------------------

def closure(names: list[str]) -> dict[str, md.Distribution]:
    """Installed distributions reachable from `names` through their requirements (no extras),
    markers evaluated for this machine."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, md.Distribution] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def dist_size(dist: md.Distribution) -> int:
    total = 0
    for f in dist.files or []:
        try:
            total += os.path.getsize(dist.locate_file(f))
        except OSError:
            pass
    return total


def dependency_report() -> dict:
    base = closure(["mlx", "transformers", "tokenizers", "numpy"])
    out = {}
    for engine in ("llguidance", "xgrammar"):
        extra = {n: d for n, d in closure([engine]).items() if n not in base}
        rows = sorted(((n, d.version, dist_size(d)) for n, d in extra.items()), key=lambda r: -r[2])
        out[engine] = {"rows": rows, "total": sum(r[2] for r in rows),
                       "requires": [r for r in (md.distribution(engine).requires or []) if "extra ==" not in r]}
    return out


IMPORT_PROBE = r"""
import resource, sys, time
import mlx.core, numpy, transformers            # what the router has imported already
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
import {mod}
dt = time.perf_counter() - t0
print(dt, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""

TORCHLESS_PROBE = r"""
import sys
sys.modules["torch"] = None                     # as if torch were not installed
try:
    import xgrammar
    print("imports")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def import_costs(rounds: int) -> dict:
    out = {m: [] for m in ("llguidance", "xgrammar")}
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    for rnd in range(rounds):
        for mod in ("llguidance", "xgrammar") if rnd % 2 == 0 else ("xgrammar", "llguidance"):
            r = subprocess.run([sys.executable, "-c", IMPORT_PROBE.replace("{mod}", mod)],
                               capture_output=True, text=True, env=env, check=True)
            dt, rss = map(float, r.stdout.split()[-2:])
            out[mod].append((dt * 1e3, rss))
    r = subprocess.run([sys.executable, "-c", TORCHLESS_PROBE], capture_output=True, text=True, env=env)
    out["xgrammar without torch"] = (r.stdout.strip() or r.stderr.strip()).splitlines()[-1]
    return out


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def show(text: str) -> str:
    """Text for a markdown cell: newlines as \\n, other unprintable characters as \\xNN / \\uNNNN."""
    def one(c: str) -> str:
        if c == "\n":
            return "\\n"
        if c.isprintable():
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
    return "".join(one(c) for c in text)


def code(text: str) -> str:
    """A markdown code span for any text (backticks inside get a longer fence)."""
    text = show(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: list[str], rows: list[list]) -> str:
    cell = lambda c: str(c).replace("|", "\\|")  # noqa: E731 - "<|im_end|>" must not split a cell
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def render(args, engines, tokenizers, big_path, setup, steps, cross, batch, mlx_apply, features, deps, imports) -> str:
    import mlx.core as mx
    import transformers

    names = [e.name for e in engines]
    out = ["# Grammar engines: llguidance vs xgrammar", ""]
    out.append(f"Run: `{' '.join([Path(sys.executable).as_posix(), *sys.argv])}` — "
               f"{args.rounds} rounds, engines alternating (llguidance first in even rounds); cells are "
               f"the median over rounds (min–max across rounds in parentheses).")
    out.append("")
    out.append(f"Machine: {platform.machine()} Linux, {os.cpu_count()} cores, Python {platform.python_version()}, "
               f"mlx {mx.__version__} ({mx.default_device()}), transformers {transformers.__version__}, "
               f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}. Engines: "
               + ", ".join(f"{e.name} {e.version}" for e in engines)
               + f", torch {md.version('torch')} (CPU build).")
    digest = hashlib.sha256(big_path.read_bytes()).hexdigest()[:16]
    out.append("")
    out.append(f"Tokenizers: `{DEMO_TOKENIZER.relative_to(REPO)}` (the demo model's byte-level BPE) and a "
               f"byte-level BPE trained here on synthetic text with Qwen2's split regex, cached at `{big_path}` "
               f"(sha256 {digest}…). Both have `<tool_call>`/`</tool_call>` as added tokens and EOS `{EOS}`.")

    out += ["", "## 1. Tokenizer setup (ms)", "",
            "Building each engine's tokenizer object from the Hugging Face tokenizer "
            "(`llguidance.hf.from_tokenizer`, `xgrammar.TokenizerInfo.from_huggingface`). Once per tokenizer "
            "per process; cacheable.", ""]
    out.append(table(["tokenizer", *names], [[t, *[fmt_spread(setup[(t, n)]) for n in names]] for t, _ in tokenizers]))

    out += ["", "## 2. Grammar compile and cold start", "",
            "Compile = llguidance: grammar text + `LLMatcher(...)`; xgrammar: fresh `GrammarCompiler(cache_enabled=False)` "
            "+ `compile_json_schema` / `compile_structural_tag` (default 8 compile threads). New matcher = from the "
            "compiled grammar (llguidance: `deep_copy()`, xgrammar: `GrammarMatcher(compiled)`). First mask = the "
            "first `fill_next_token_bitmask` on a fresh compile (llguidance builds its lexer lazily here).", ""]
    rows = []
    for (t, g), per in steps.items():
        for n in names:
            p = per[n]
            rows.append([t, g, n, fmt_spread(p["compile"], digits=2), fmt_spread(p["new_matcher"]),
                         fmt_spread(p["first_mask"]), fmt_spread(p["cold"], digits=2)])
    out.append(table(["tokenizer", "grammar", "engine", "compile (ms)", "new matcher (µs)", "first mask (µs)",
                      "compile + first mask (ms)"], rows))

    out += ["", "## 3a. Per-step cost along valid outputs", "",
            "Mask = one `fill_next_token_bitmask` into a numpy int32 bitmask; accept = `consume_token` / "
            "`accept_token`. JSON schema: one BugReport document; tools: one call of each of the 12 tools "
            "(a fresh matcher per call, same compiled grammar). Steps include the final mask that must allow "
            "EOS. \"mask ms / output\" is the sum of mask times over one output (tools: mean per call). "
            "The two tool grammars differ by design in one place: llguidance's `%json` covers the whole "
            "`{\"name\": …, \"arguments\": …}` object (whitespace inside it is free), xgrammar's tag begins with "
            "the literal `\\n{\"name\": \"…\", \"arguments\": `.", ""]
    rows = []
    for (t, g), per in steps.items():
        for n in names:
            p = per[n]
            mean_allowed = f"{np.mean(p['allowed']):.0f}" if p["allowed"] else "–"
            rows.append([t, g, n, p["steps"], fmt_spread(p["median"]), fmt_spread(p["p95"]), fmt_spread(p["max"]),
                         fmt_spread(p["accept"]), fmt_spread(p["total"], digits=2), mean_allowed,
                         "; ".join(sorted(p["failures"])) or "ok"])
    out.append(table(["tokenizer", "grammar", "engine", "steps", "mask median (µs)", "mask p95 (µs)", "mask max (µs)",
                      "accept median (µs)", "mask ms / output", "allowed tokens / step (mean)", "valid output"], rows))
    out += ["", "Cross-check (round 1): steps where both engines produced the identical mask, and the tokens "
            "that only one engine allowed where they differ (number of distinct such tokens in brackets; "
            "decoded, control characters escaped).", ""]
    rows = []
    for (t, g), c in cross.items():
        rows.append([t, g, f"{c['same']} / {c['steps']}",
                     f"[{c['distinct']['llguidance']}] " + (", ".join(c["top"]["llguidance"]) or "–"),
                     f"[{c['distinct']['xgrammar']}] " + (", ".join(c["top"]["xgrammar"]) or "–")])
    out.append(table(["tokenizer", "grammar", "identical masks", "only llguidance allows: token (steps)",
                      "only xgrammar allows: token (steps)"], rows))

    out += ["", "## 3b. Applying the bitmask to MLX logits (CPU backend, µs)", "",
            "float32 logits of shape (batch, vocab) → -inf where the bit is 0, in plain mlx ops (same for both "
            "engines: both fill the same int32 layout). Includes `mx.array(mask)` from numpy and `mx.eval`. "
            "Median of 200 calls per round.", ""]
    vocabs = sorted({k[0] for k in mlx_apply})
    variants = list(dict.fromkeys(k[2] for k in mlx_apply))
    rows = [[v, b, *[fmt_spread(mlx_apply[(v, b, var)]) for var in variants]] for v in vocabs for b in (1, 8)]
    out.append(table(["vocab", "batch", *variants], rows))

    out += ["", "## 3c. Batch of 8 sequences (µs per step, all 8)", "",
            "Eight different valid outputs in lockstep. seq = `fill_next_token_bitmask` row by row, accept one by "
            "one; par = llguidance `LLExecutor(num_threads=2)` + `fill_next_token_bitmask_par` / `consume_token_par`, "
            "xgrammar `BatchGrammarMatcher(max_threads=2)` + `batch_fill_next_token_bitmask` / `batch_accept_token`. "
            f"{args.batch_steps} steps per pass, fresh compile per pass.", ""]
    rows = []
    for (t, g), res in batch.items():
        for n in names:
            rows.append([t, g, n, fmt_spread(res[(n, "seq", "fill")]), fmt_spread(res[(n, "par", "fill")]),
                         fmt_spread(res[(n, "seq", "accept")]), fmt_spread(res[(n, "par", "accept")])])
    out.append(table(["tokenizer", "grammar", "engine", "8 masks seq", "8 masks par", "8 accepts seq",
                      "8 accepts par"], rows))

    out += ["", "## 4. JSON-schema features", "",
            "Each schema compiled alone with each engine's defaults (demo tokenizer), then a valid document and "
            "one or more violating ones walked through the mask (accepted = every token allowed, then EOS). "
            "supported = valid allowed, every violation blocked; silently ignored = compiles, violation allowed; "
            "rejected = compile error (message quoted).", ""]
    rows = []
    for feat, schema, valid, invalids in FEATURES:
        cells = []
        for n in names:
            status, detail = features[(feat, n)]
            cells.append(f"**{status}**" + (f": {detail}" if detail else ""))
        compact = json.dumps(schema, separators=(",", ":"))
        rows.append([feat, code(compact) if len(compact) <= 120 else "(see FEATURES in the script)",
                     code(valid), ", ".join(code(d) for d in invalids) or "–", *cells])
    out.append(table(["feature", "schema", "valid", "violating", *names], rows))

    out += ["", "## 5. Dependencies", "",
            "Installed on top of mlx, transformers, tokenizers and numpy (their closure is not counted); sizes from "
            "each distribution's RECORD (what pip installed in this venv).", ""]
    for engine, d in deps.items():  # rows: (name, version, size)
        out.append(f"**{engine}** requires `{'`, `'.join(d['requires']) or 'nothing'}` — adds "
                   f"{len(d['rows'])} distribution(s), {mb(d['total'])}:")
        out.append("")
        out.append(table(["distribution", "version", "installed size"], [[n, v, mb(s)] for n, v, s in d["rows"]]))
        out.append("")
    rows = []
    for mod in ("llguidance", "xgrammar"):
        rows.append([mod, fmt_spread([x[0] for x in imports[mod]], digits=0),
                     fmt_spread([x[1] for x in imports[mod]], digits=0)])
    out.append("Import cost in a fresh process that has already imported mlx.core, numpy and transformers:")
    out.append("")
    out.append(table(["module", "import time (ms)", "peak RSS growth (MB)"], rows))
    out += ["", f"`import xgrammar` with torch unavailable: {imports['xgrammar without torch']}", ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=151000, help="size of the large BPE vocabulary (default 151000)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per measurement (>= 3 for the record)")
    ap.add_argument("--batch-steps", type=int, default=128, help="lockstep steps per batch pass")
    args = ap.parse_args()

    say = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    say("dependencies and import cost")
    deps, imports = dependency_report(), import_costs(args.rounds)
    say("tokenizers (the large one is trained once and cached)")
    tokenizers = load_tokenizers(args.vocab)
    big_path = large_tokenizer_file(args.vocab)
    engines = [Llguidance(), Xgrammar()]
    say("1. tokenizer setup")
    setup = measure_tokenizer_setup(engines, tokenizers, args.rounds)
    say("2-3a. compile and per-step masks")
    steps, cross = measure_steps(engines, tokenizers, args.rounds)
    say("3b. mask apply on MLX")
    mlx_apply = measure_mlx_apply([len(t) for _, t in tokenizers], args.rounds)
    say("3c. batch of 8")
    batch = measure_batch(engines, tokenizers, args.rounds, args.batch_steps)
    say("4. JSON-schema features")
    features = check_features(engines, tokenizers[0][1])
    report = render(args, engines, tokenizers, big_path, setup, steps, cross, batch, mlx_apply, features, deps, imports)
    REPORT_PATH.write_text(report + "\n")
    print(report)
    say(f"written to {REPORT_PATH}")


if __name__ == "__main__":
    main()
