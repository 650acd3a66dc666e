"""Held-out evaluation of the demo model: tool calls, arguments, text replies, thinking.

The evaluation set is fixed (its own seed, disjoint from training): weather requests for
20 cities from ``lexicon.TRAIN_CITIES`` ("seen") and every city of
``lexicon.HELDOUT_CITIES`` ("held-out", never in training text nor in the tokenizer's
corpus), search queries and file paths from training words and from held-out ones, answers after a
tool result for seen and held-out cities, plain chat with and without tools, and chat and
weather calls with thinking on.
Request phrasings come from the training templates; what is held out is the argument.
Decoding is greedy through mlx-lm's ``batch_generate``, the path the server uses.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from caches.quantized import KVQuantization, row_caches
from engines.demo import corpus
from engines.demo import lexicon as lx

logger = logging.getLogger(__name__)

EVAL_SEED = 20240607
MAX_TOKENS = 96
_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
# Plain chat ("text replies") may use unseen phrasings: the check is a readable reply.
CHAT_PROMPTS = (
    "Hi", "Hello!", "Good morning", "How are you?", "Who are you?", "What can you do?", "Thanks!",
    "Tell me a joke.", "What is the capital of France?", "What's the capital city of Japan?",
    "How many days are in a week?", "What color is the sky?", "Bye", "Explain quantum physics.",
    "Good afternoon!", "What's up?", "Can you help me with something?", "Do you like music?",
    "What is the capital of Italy?", "Nice to meet you.",
)


def _case(kind: str, split: str, messages: list[dict], tools: list | None, thinking: bool, **expect) -> dict[str, Any]:
    return {"kind": kind, "split": split, "messages": messages, "tools": tools, "thinking": thinking, "expect": expect}


def _tool_case(rng: random.Random, args: corpus.ArgumentSource, kind: str, split: str, thinking: bool = False,
               value: str | None = None) -> dict[str, Any]:
    # A pinned value covers every held-out city exactly once.
    task = corpus.tool_task(rng, args, kind) if value is None else _with_value(rng, kind, value)
    tools = corpus.offered_tools(rng, [kind])
    messages = [{"role": "user", "content": task["request"]}]
    return _case(f"call_{kind}", split, messages, tools, thinking, name=task["name"], arguments=task["arguments"])


def _with_value(rng: random.Random, kind: str, value: str) -> dict[str, Any]:
    class _Fixed(corpus.ArgumentSource):
        def city(self) -> str:
            return value

    return corpus.tool_task(rng, _Fixed(rng), kind)


def _result_case(rng: random.Random, city: str, split: str) -> dict[str, Any]:
    task = _with_value(rng, "weather", city)
    call = {"type": "function", "function": {"name": task["name"], "arguments": task["arguments"]}}
    messages = [{"role": "user", "content": task["request"]},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": task["result"]}]
    result = json.loads(task["result"])
    facts = {"city": city, "temperature": str(result["temperature"]), "condition": result["condition"]}
    return _case("answer_after_result", split, messages, corpus.offered_tools(rng, ["weather"]), False, facts=facts)


def eval_cases(seed: int = EVAL_SEED) -> list[dict[str, Any]]:
    """The fixed evaluation set (170 prompts)."""
    rng = random.Random(seed)
    seen = corpus.ArgumentSource(rng)
    heldout = corpus.ArgumentSource(rng, heldout=True)
    cases = [_tool_case(rng, seen, "weather", "seen", value=c) for c in rng.sample(lx.TRAIN_CITIES, 20)]
    cases += [_tool_case(rng, heldout, "weather", "heldout", value=c) for c in lx.HELDOUT_CITIES]
    cases += [_tool_case(rng, args, kind, split) for args, split in ((seen, "seen"), (heldout, "heldout"))
              for kind in ("search", "file") for _ in range(10)]
    cases += [_result_case(rng, c, "seen") for c in rng.sample(lx.TRAIN_CITIES, 15)]
    cases += [_result_case(rng, c, "heldout") for c in rng.sample(lx.HELDOUT_CITIES, 15)]
    cases += [_case("chat", "chat", [{"role": "user", "content": p}], None, False) for p in CHAT_PROMPTS]
    cases += [_case("chat_with_tools", "chat", [{"role": "user", "content": p}], corpus.offered_tools(rng, ["weather"]), False)
              for p in CHAT_PROMPTS[:10]]
    cases += [_case("think_chat", "chat", [{"role": "user", "content": p}], None, True) for p in CHAT_PROMPTS[:10]]
    thinking_calls = [_tool_case(rng, seen, "weather", "seen", thinking=True, value=c) for c in rng.sample(lx.TRAIN_CITIES, 10)]
    thinking_calls += [_tool_case(rng, heldout, "weather", "heldout", thinking=True, value=c) for c in lx.HELDOUT_CITIES[:10]]
    for case in thinking_calls:
        case["kind"] = "think_call_weather"
    return cases + thinking_calls


def parse_reply(text: str) -> dict[str, Any]:
    """Split a raw completion into think block, tool calls (parsed JSON or None) and content."""
    think = None
    if text.startswith("<think>\n") and "</think>" in text:
        think, text = text[len("<think>\n"):].split("</think>", 1)
        think, text = think.strip(), text.lstrip("\n")
    calls = []
    for raw in _CALL.findall(text):
        try:
            calls.append(json.loads(raw))
        except json.JSONDecodeError:
            calls.append(None)
    content = _CALL.sub("", text).strip()
    return {"think": think, "calls": calls, "content": content, "has_call_marker": "<tool_call>" in text}


def readable(text: str) -> bool:
    """Printable ASCII with at least two real words and no markup."""
    return (bool(text) and text.isascii() and text.isprintable() and "<" not in text
            and len(re.findall(r"[A-Za-z]{2,}", text)) >= 2)


def score(case: dict[str, Any], text: str, stopped: bool) -> dict[str, bool]:
    """Per-case checks. ``stopped`` means the model ended its turn with ``<|im_end|>``."""
    reply, expect = parse_reply(text), case["expect"]
    checks: dict[str, bool] = {"stopped": stopped}
    if case["thinking"]:
        checks["think"] = bool(reply["think"]) and readable(reply["think"])
    if "name" in expect:
        call = reply["calls"][0] if len(reply["calls"]) == 1 else None
        well_formed = (stopped and isinstance(call, dict) and set(call) == {"name", "arguments"}
                       and isinstance(call["arguments"], dict) and not reply["content"])
        checks["well_formed"] = well_formed
        checks["right_tool"] = well_formed and call["name"] == expect["name"]
        checks["right_arguments"] = checks["right_tool"] and call["arguments"] == expect["arguments"]
    else:
        checks["text_reply"] = stopped and not reply["has_call_marker"] and readable(reply["content"])
        if "facts" in expect:
            # Whole words: "2 degrees" does not state a temperature of 21.
            for name, fact in expect["facts"].items():
                checks[f"states_{name}"] = checks["text_reply"] and re.search(
                    rf"(?<![\w-]){re.escape(fact)}(?![\w])", reply["content"]) is not None
            checks["uses_result"] = all(checks[f"states_{name}"] for name in expect["facts"])
    return checks


UNSEEN_PROMPTS_PATH = Path(__file__).with_name("unseen_prompts.txt")
# Prompts of the same kinds, also kept out of training, for choosing between recipes: a recipe
# picked by its score on the unseen prompts would be tuned to the set that measures it.
VALIDATION_PROMPTS_PATH = Path(__file__).with_name("validation_prompts.txt")
UNSEEN_MAX_TOKENS = 64


def unseen_prompts(path: Path = UNSEEN_PROMPTS_PATH) -> list[tuple[str, str]]:
    """(category, prompt) pairs of the fixed set of prompts kept out of training."""
    rows = [line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    return [(category, prompt) for category, prompt in rows]


def unseen_cases(seed: int = EVAL_SEED, path: Path = UNSEEN_PROMPTS_PATH) -> list[dict[str, Any]]:
    """One case per prompt of ``path`` (the unseen prompts, or ``VALIDATION_PROMPTS_PATH``);
    every third offers a few tools (none of them needed)."""
    rng = random.Random(seed + 1)
    return [_case(f"unseen_{category}", "unseen", [{"role": "user", "content": prompt}],
                  corpus.offered_tools(rng, []) if i % 3 == 2 else None, False)
            for i, (category, prompt) in enumerate(unseen_prompts(path))]


def loops(text: str, *, max_period: int = 40, share: float = 0.5) -> bool:
    """Whether repetition fills the reply: pieces of at most ``max_period`` characters, each
    repeated back to back at least three times, cover ``share`` of it ("hikrekrekrek...",
    "Seo woo woo woo woooooo...")."""
    covered = np.zeros(len(text), dtype=bool)
    for period in range(1, max_period + 1):
        same = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        same = same[period:] == same[:-period] if len(same) > period else np.zeros(0, dtype=bool)
        run = 0
        for i, equal in enumerate(np.append(same, False)):
            if equal:
                run += 1
                continue
            if run >= 2 * period:  # the run and the period before it: three copies
                covered[i - run:i + period] = True
            run = 0
    return len(text) >= 12 and covered.mean() >= share


def brief_reply(case: dict[str, Any], text: str, stopped: bool) -> dict[str, bool]:
    """Checks for a prompt outside the demo's training: a readable text reply that ends its
    turn, or (tools offered) a well-formed call to one of them; and whether it loops."""
    reply = parse_reply(text)
    offered = {t["function"]["name"] for t in case["tools"] or []}
    calls = reply["calls"]
    called = (stopped and bool(calls) and all(isinstance(c, dict) and c.get("name") in offered
                                              and isinstance(c.get("arguments"), dict) for c in calls)
              and not reply["content"])
    text_reply = stopped and not reply["has_call_marker"] and readable(reply["content"])
    return {"text_reply": text_reply, "tool_call": called, "ends_briefly": text_reply or called, "loops": loops(text)}


def unseen_report(model_dir: Path, *, cases: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Greedy replies (64 tokens at most) to the unseen prompts: the share that end briefly
    (``brief_reply``), the loop rate, per category, and the replies themselves."""
    cases = unseen_cases() if cases is None else cases
    outputs = generate(Path(model_dir), cases, max_tokens=UNSEEN_MAX_TOKENS)
    checks = [brief_reply(c, text, stopped) for c, (text, stopped) in zip(cases, outputs)]

    def rates(rows: list[dict[str, bool]]) -> dict[str, float]:
        return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]} | {"n": len(rows)}

    by_kind: dict[str, list[dict[str, bool]]] = defaultdict(list)
    for case, row in zip(cases, checks):
        by_kind[case["kind"]].append(row)
    return {"all": rates(checks), "groups": {k: rates(v) for k, v in sorted(by_kind.items())},
            "replies": [(c["messages"][-1]["content"], text, row) for c, (text, _), row in zip(cases, outputs, checks)]}


def generate(model_dir: Path, cases: list[dict[str, Any]], max_tokens: int = MAX_TOKENS,
             kv_quantization: KVQuantization | None = None) -> list[tuple[str, bool]]:
    """Greedy completions for ``cases``: (raw text with markup, ended with <|im_end|>).

    With ``kv_quantization`` (from the first token: ``quantize_after`` 0), every sequence
    runs on the server's batched quantized KV cache.
    """
    from mlx_lm import load
    from mlx_lm.generate import batch_generate
    from mlx_lm.models.cache import make_prompt_cache

    model, tokenizer = load(str(model_dir))
    prompts = [tokenizer.apply_chat_template(c["messages"], tools=c["tools"], add_generation_prompt=True,
                                             enable_thinking=c["thinking"]) for c in cases]
    caches = None
    if kv_quantization is not None:
        if kv_quantization.quantize_after:
            raise ValueError("the evaluation quantizes from the first token (quantize_after = 0)")
        caches = [row_caches(make_prompt_cache(model), kv_quantization) for _ in prompts]
    out = batch_generate(model, tokenizer, prompts, prompt_caches=caches, max_tokens=max_tokens, return_token_ids=True)
    return [(text, len(ids) < max_tokens) for text, ids in zip(out.texts, out.token_ids)]


def copy_report(model_dir: Path, *, per_source: int = 20, seed: int = EVAL_SEED) -> dict[str, float]:
    """The share of weather requests whose call names the requested city exactly, by where the
    city comes from: the training list, fresh draws of the invented-name generator training used
    (``corpus.ArgumentSource.invented_name``, another seed's), and the held-out list. It tells
    copying apart from recall: a model that copies does as well on the last two as on the first."""
    rng = random.Random(seed + 2)
    args = corpus.ArgumentSource(random.Random(seed + 3), invented=1.0)
    sources = {"train": list(lx.TRAIN_CITIES[:per_source]), "invented": [args.invented_name() for _ in range(per_source)],
               "heldout": list(lx.HELDOUT_CITIES[:per_source])}
    cases = [_tool_case(rng, args, "weather", source, value=city) for source, cities in sources.items() for city in cities]
    outputs = generate(Path(model_dir), cases, max_tokens=48)
    copied: dict[str, list[bool]] = defaultdict(list)
    for case, (text, _) in zip(cases, outputs):
        calls = parse_reply(text)["calls"]
        arguments = calls[0].get("arguments") if calls and isinstance(calls[0], dict) else None
        copied[case["split"]].append(isinstance(arguments, dict) and arguments.get("city") == case["expect"]["arguments"]["city"])
    return {source: round(sum(hits) / len(hits), 4) for source, hits in copied.items()}


def summarize(cases: list[dict[str, Any]], results: list[dict[str, bool]]) -> dict[str, Any]:
    """Rates per (kind, split) group and the headline numbers."""
    groups: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for case, checks in zip(cases, results):
        for key, ok in checks.items():
            groups[f"{case['kind']}/{case['split']}"][key].append(ok)
            if key in ("well_formed", "right_arguments", "text_reply", "think", "uses_result"):
                # Copying is scored per split: seen values are learnable by heart, held-out ones are not.
                split_scored = key in ("right_arguments", "uses_result")
                groups[f"all/{case['split']}" if split_scored else "all"][key].append(ok)
    rates = {g: {k: round(sum(v) / len(v), 4) for k, v in checks.items()} | {"n": len(next(iter(checks.values())))}
             for g, checks in sorted(groups.items())}
    head = rates["all"]
    return {
        "tool_call_rate": head["well_formed"],
        "argument_accuracy_seen": rates["all/seen"]["right_arguments"],
        "argument_accuracy_heldout": rates["all/heldout"]["right_arguments"],
        "text_reply_rate": head["text_reply"],
        "think_rate": head["think"],
        "answer_uses_result_seen": rates["all/seen"]["uses_result"],
        "answer_uses_result_heldout": rates["all/heldout"]["uses_result"],
        "groups": rates,
    }


def evaluate(model_dir: Path, *, cases: list[dict[str, Any]] | None = None,
             kv_quantization: KVQuantization | None = None) -> dict[str, Any]:
    """Run the fixed evaluation set against the checkpoint in ``model_dir``; return the rates."""
    cases = eval_cases() if cases is None else cases
    outputs = generate(Path(model_dir), cases, kv_quantization=kv_quantization)
    results = [score(c, text, stopped) for c, (text, stopped) in zip(cases, outputs)]
    for case, (text, _), checks in zip(cases, outputs, results):
        if not all(checks.values()):
            logger.debug("failed %s/%s: %r -> %r", case["kind"], case["split"], case["messages"][-1]["content"], text)
    summary = summarize(cases, results)
    logger.info("evaluation: %s", {k: v for k, v in summary.items() if k != "groups"})
    return summary
