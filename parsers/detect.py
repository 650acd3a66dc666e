"""Chooses a checkpoint's tool-call and reasoning parsers, and says why.

Order (reference/tool-formats.md §5): pinned in config -> checkpoint metadata
(``tokenizer_config.json`` ``tool_parser_type`` / ``chat_template_type``; mlx-lm names
mapped to ours) -> chat-template markers, most specific first (a template with no
tool-call or no thinking format of its own ends the search: None, not a guess) -> decisive special
tokens (``<tool_call>`` alone is not: Qwen3 and Qwen3-Coder share a vocabulary) ->
``config.json`` ``model_type`` with the model name as tie-breaker -> the model name
alone -> output sniffing (the ``auto`` tool parser).  Owns no parsing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .registry import reasoning_parser_name, tool_parser_name

__all__ = ["detect_parsers", "explain_detection"]

Rule = tuple[tuple[str, ...], str]
"""(markers that must all be present, parser name)."""

# Tool-call markers in chat templates, most specific first (mlx-lm / llama.cpp order).
_TOOL_TEMPLATE: list[Rule] = [
    (("<|channel|>", "<|constrain|>"), "openai"),
    (("<minimax:tool_call>",), "minimax_m2"),
    (("｜DSML｜tool_calls",), "deepseek_v4"),
    (("｜DSML｜",), "deepseek_v32"),
    (("<｜tool▁calls▁begin｜>", "```json"), "deepseek_v3"),
    (("<｜tool▁calls▁begin｜>", "function<｜tool▁sep｜>"), "deepseek_v3"),
    (("<｜tool▁calls▁begin｜>",), "deepseek_v31"),
    (("<|tool_calls_section_begin|>",), "kimi_k2"),
    (("<seed:tool_call>",), "seed_oss"),
    (("<arg_key>", "<tool_sep>"), "hy_v3"),
    # Poolside Laguna writes GLM-4.7 calls; its turns open with an <assistant> token.
    (("<arg_key>", "<assistant>"), "poolside_v1"),
    (("\n<arg_key>",), "glm45"),
    (("<arg_key>",), "glm47"),
    (("<longcat_tool_call>",), "longcat"),
    (("<tool_call>\n<function=",), "qwen3_coder"),
    (("<function=example_function_name>",), "qwen3_coder"),
    (("<|tool_call>", "<tool_call|>"), "gemma4"),
    (("<start_function_call>",), "functiongemma"),
    (("[TOOL_CALLS]",), "mistral"),
    (("<|python_start|>",), "llama4_pythonic"),
    # ToolACE (Llama 3 turns) describes pythonic [f(a=1)] calls; its ipython header
    # only wraps tool results, so it must win over the llama3_json rules below.
    (("[func_name1(params_name1=",), "pythonic"),
    (("<|python_tag|>",), "llama3_json"),
    (("<|start_header_id|>ipython",), "llama3_json"),
    (("<|tool_call_start|>",), "lfm2"),
    (("<|tool_list_start|>",), "lfm2"),
    (("functools[",), "phi4_mini_json"),
    (("<|tool_call|>",), "granite"),
    (("<|action_start|>",), "internlm"),
    (("<|tools_prefix|>",), "apertus"),
    (("steptml:",), "step3"),
    # Cohere Command 4 answers in <|START_TEXT|>, Command A / R7B in <|START_RESPONSE|>.
    (("<|START_ACTION|>", "<|START_TEXT|>"), "cohere_command4"),
    (("<|START_ACTION|>",), "cohere_command3"),
    (("<function_calls>",), "olmo3"),
    (("function call<|role_sep|>",), "gigachat3"),
    (("<|function_call|>",), "gigachat3"),
    (("<function_call>",), "granite-20b-fc"),
    (("<tool_calls>", "]~b]"), "minimax"),
    (("<tool_calls>", "<answer>"), "hunyuan_a13b"),
    (("<tool_calls>",), "jamba"),
    (("<tool_call>", "<|start_of_role|>"), "granite4"),
    (("<tool_call>", "<response>"), "ernie45"),
    (("<tool_call>", "tool_call.name"), "hermes"),
    (("<tool_call>", '"name": <function-name>'), "hermes"),
    (("<tool_call>",), "hermes"),
]

_REASONING_TEMPLATE: list[Rule] = [
    (("<|channel|>", "analysis"), "openai_gptoss"),
    (("<seed:think>",), "seed_oss"),
    (("[THINK]",), "mistral"),
    (("<|channel>",), "gemma4"),
    (("thought process",), "granite"),
    (("<|START_THINKING|>", "<|START_TEXT|>"), "cohere_command4"),
    (("<|START_THINKING|>",), "cohere_command3"),
    (("</think>", "<answer>"), "hunyuan_a13b"),
    (("</think>", "<response>"), "ernie45"),
    (("</think>", "]~b]"), "minimax_m2"),
    (("</think>", "<minimax:tool_call>"), "minimax_m2"),
    (("</think>", "<|tool_calls_section_begin|>"), "kimi_k2"),
    (("</think>", "<|im_middle|>"), "kimi_k2"),
    # Hunyuan v3 and Laguna templates also show GLM-style <arg_key> calls.
    (("</think>", "<｜hy_Assistant｜>"), "hy_v3"),
    (("</think>", "<assistant>", "<arg_key>"), "poolside_v1"),
    (("</think>", "[gMASK]"), "glm45"),
    (("</think>", "<arg_key>"), "glm45"),
    (("</think>", "｜DSML｜tool_calls"), "deepseek_v4"),
    (("</think>", "<｜Assistant｜>", "thinking"), "deepseek_v3"),
    (("</think>", "<｜Assistant｜>"), "deepseek_r1"),
    (("</think>", "steptml"), "step3"),
    (("</think>", "<function_calls>"), "olmo3"),
    # Nemotron 3: Qwen3-Coder calls; thinking off closes the block as <think></think>.
    (("<think></think>", "<function="), "nemotron_v3"),
    # Qwen3.5 opens the block in its prompt too, but vLLM parses it with qwen3.
    (("</think>", "<function=example_function_name>"), "qwen3"),
    # QwQ / Qwen3-2507-Thinking always open the block in the generation prompt: vLLM
    # recommends deepseek_r1 (everything before </think> is reasoning).
    (("</think>", "<|im_start|>assistant\\n<think>\\n"), "deepseek_r1"),
    (("</think>", "<|im_start|>assistant\n<think>\n"), "deepseek_r1"),
    (("</think>",), "qwen3"),
]

# Single special tokens that identify a format on their own.
_TOOL_TOKENS: list[Rule] = [
    (("<|channel|>", "<|constrain|>"), "openai"),
    (("<|tool_calls_section_begin|>",), "kimi_k2"),
    (("<｜tool▁calls▁begin｜>",), "deepseek_v3"),
    (("[TOOL_CALLS]",), "mistral"),
    (("<|python_start|>",), "llama4_pythonic"),
    (("<|python_tag|>",), "llama3_json"),
    (("<|tool_call_start|>",), "lfm2"),
    (("<minimax:tool_call>",), "minimax_m2"),
    (("<seed:tool_call>",), "seed_oss"),
    (("<|tool_call>",), "gemma4"),
    (("<start_function_call>",), "functiongemma"),
    (("<longcat_tool_call>",), "longcat"),
    (("<|action_start|>",), "internlm"),
    (("<|tool_call|>",), "granite"),
]
_REASONING_TOKENS: list[Rule] = [
    (("<|channel|>", "<|constrain|>"), "openai_gptoss"),
    (("<seed:think>",), "seed_oss"),
    (("[THINK]",), "mistral"),
    (("<|channel>",), "gemma4"),
]

# Tool-call formats some templates teach that no parser here reads (label, markers): the
# template decides there is no parser rather than leaving a guess to the model name.
_UNPARSED_TOOL_TEMPLATE: list[Rule] = [
    (("json-formatted list of actions",), "Command R/R+ generic JSON actions"),
]
# A template without any of these words never shows the model tools or tool calls (Gemma 2,
# Phi-3.5); one with them but no known marker keeps the later, weaker signals.
_TOOL_WORDS = re.compile(r"tool|function", re.IGNORECASE)
# Likewise for thinking: no such word, no thinking (Kimi K2 Instruct, Mistral Small 3.2).
_THINKING_WORDS = re.compile(r"think|reason|thought", re.IGNORECASE)
# Non-thinking releases of thinking families: their vocabulary has </think> all the same.
_NON_THINKING = (r"kimi.*instruct", r"qwen3.*instruct-2507", r"qwen3-?coder", r"qwq.*preview")

# config.json model_type -> (tool, reasoning); the name refines shared architectures.
_MODEL_TYPES: dict[str, tuple[str | None, str | None]] = {
    "gpt_oss": ("openai", "openai_gptoss"), "glm4_moe": ("glm45", "glm45"), "glm4": ("glm45", "glm45"),
    "deepseek_v3": ("deepseek_v3", "deepseek_v3"), "deepseek_v32": ("deepseek_v32", "deepseek_v3"),
    "deepseek_v4": ("deepseek_v4", "deepseek_v4"), "kimi_k2": ("kimi_k2", "kimi_k2"),
    "qwen3": ("hermes", "qwen3"), "qwen3_moe": ("hermes", "qwen3"), "qwen3_next": ("hermes", "qwen3"),
    "qwen3_5": ("qwen3_coder", "qwen3"), "qwen3_5_moe": ("qwen3_coder", "qwen3"), "qwen2": ("hermes", None),
    "qwen2_moe": ("hermes", None), "minimax_m2": ("minimax_m2", "minimax_m2"), "minimax_m1": ("minimax", None),
    "mistral": ("mistral", None), "mistral3": ("mistral", None), "ministral3": ("mistral", None),
    "llama": ("llama3_json", None), "llama4": ("llama4_pythonic", None), "gemma3": ("pythonic", None),
    "gemma3_text": ("pythonic", None), "gemma4": ("gemma4", "gemma4"), "granite": ("granite", "granite"),
    "granitemoe": ("granite", "granite"), "granitemoehybrid": ("granite4", None),
    "seed_oss": ("seed_oss", "seed_oss"), "hunyuan_v1_moe": ("hunyuan_a13b", "hunyuan_a13b"),
    "internlm2": ("internlm", None), "step3": ("step3", "step3"), "step3p5": ("step3p5", "step3p5"),
    "ernie4_5_moe": ("ernie45", "ernie45"), "ernie4_5": ("ernie45", "ernie45"), "jamba": ("jamba", None),
    "apertus": ("apertus", None), "olmo3": ("olmo3", "olmo3"), "lfm2": ("lfm2", None), "lfm2_moe": ("lfm2", None),
    "longcat_flash": ("longcat", None), "phi3": (None, None),
}
# (name pattern, tool, reasoning); "" keeps the model_type's choice.  Used as refinements
# of a model_type and, alone, when there is no model_type.
_NAMES: list[tuple[str, str | None, str | None]] = [
    (r"gpt-?oss", "openai", "openai_gptoss"), (r"qwen3(\.|_|-)?5", "qwen3_coder", "qwen3"),
    (r"qwen3-?coder", "qwen3_coder", None), (r"qwen3.*instruct-2507", "hermes", None),
    (r"qwen3", "hermes", "qwen3"), (r"qwq", "hermes", "deepseek_r1"), (r"qwen2\.5", "hermes", None),
    (r"kimi", "kimi_k2", "kimi_k2"), (r"deepseek-?r1", "deepseek_v3", "deepseek_r1"),
    (r"deepseek-?v3\.?1|terminus", "deepseek_v31", "deepseek_v3"), (r"deepseek-?v3\.?2", "deepseek_v32", "deepseek_v3"),
    (r"deepseek-?v4", "deepseek_v4", "deepseek_v4"), (r"deepseek", "deepseek_v3", "deepseek_v3"),
    (r"glm-?4\.7", "glm47", "glm45"), (r"glm-?4", "glm45", "glm45"), (r"minimax-?m1", "minimax", None),
    (r"minimax", "minimax_m2", "minimax_m2"), (r"magistral", "mistral", "mistral"),
    (r"mistral|devstral|ministral|codestral", "mistral", None), (r"hermes", "hermes", None), (r"xlam", "xlam", None),
    (r"toolace", "pythonic", None), (r"llama-?4", "llama4_pythonic", None), (r"llama", "llama3_json", None),
    (r"functiongemma", "functiongemma", None), (r"gemma-?4", "gemma4", "gemma4"), (r"gemma", "pythonic", None),
    (r"granite-?4", "granite4", None), (r"granite-?20b-?function", "granite-20b-fc", None),
    (r"granite", "granite", "granite"), (r"phi-?4-?mini", "phi4_mini_json", None),
    (r"seed-?oss", "seed_oss", "seed_oss"), (r"hunyuan", "hunyuan_a13b", "hunyuan_a13b"), (r"intern", "internlm", None),
    (r"step-?3\.?5|step3p5", "step3p5", "step3p5"),
    (r"step-?3", "step3", "step3"), (r"ernie", "ernie45", "ernie45"), (r"jamba", "jamba", None),
    (r"apertus", "apertus", None), (r"olmo-?3", "olmo3", "olmo3"), (r"lfm2", "lfm2", None),
    (r"longcat", "longcat", None), (r"gigachat", "gigachat3", None),
    (r"command-?a|command-?r7b", "cohere_command3", "cohere_command3"), (r"laguna", "poolside_v1", "poolside_v1"),
    (r"mimo", "qwen3_coder", "qwen3"), (r"nemotron-?3", "qwen3_coder", "nemotron_v3"), (r"holo-?2", None, "holo2"),
    (r"\bhy-?3\b", "hy_v3", "hy_v3"),
]


_NAME_RULES = {pattern: (tool, reasoning) for pattern, tool, reasoning in _NAMES}
# Names that refine a shared architecture (patterns of ``_NAMES``, tried in order).
_QWEN3 = (r"qwen3-?coder", r"qwen3.*instruct-2507")
_REFINE: dict[str, tuple[str, ...]] = {
    "qwen3": _QWEN3, "qwen3_moe": _QWEN3, "qwen2": (r"qwq",),
    "llama": (r"hermes", r"xlam", r"toolace"),
    "deepseek_v3": (r"kimi", r"deepseek-?r1", r"deepseek-?v3\.?1|terminus"),
    "glm4_moe": (r"glm-?4\.7",), "phi3": (r"phi-?4-?mini",), "gemma3_text": (r"functiongemma",),
    "granite": (r"granite-?20b-?function",), "mistral": (r"magistral",), "mistral3": (r"magistral",),
}


def _match(rules: list[Rule], text: str | set[str]) -> Rule | None:
    for markers, name in rules:
        if all(m in text for m in markers):
            return markers, name
    return None


def _quote(markers: Iterable[str]) -> str:
    return " and ".join(repr(m) for m in markers)


def _from_metadata(config: dict[str, Any]) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    tool = reasoning = None
    for key in ("tool_parser_type", "chat_template_type"):
        value = config.get(key)
        if not isinstance(value, str):
            continue
        try:
            tool = tool or (tool_parser_name(value), f"tokenizer_config {key}={value}")
        except ValueError:
            continue  # a parser this package does not implement (kimi_k3, muse_spark...)
        if key == "chat_template_type" and value.startswith("deepseek"):
            reasoning = ("deepseek_v3", f"tokenizer_config {key}={value}")
    return tool, reasoning


def _template_of(config: dict[str, Any]) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        template = "\n".join(t.get("template", "") for t in template if isinstance(t, dict))
    return template if isinstance(template, str) else None


def _tokens_of(config: dict[str, Any]) -> set[str]:
    decoder = config.get("added_tokens_decoder")
    if not isinstance(decoder, dict):
        return set()
    return {t["content"] for t in decoder.values() if isinstance(t, dict) and isinstance(t.get("content"), str)}


def _by_model(model_type: str | None, model_name: str | None, kind: int) -> tuple[str, str] | None:
    """Pick from model_type (refined by the name), else from the name alone."""
    name = (model_name or "").lower()
    if model_type and model_type in _MODEL_TYPES:
        for pattern in _REFINE.get(model_type, ()):
            if re.search(pattern, name):
                choice = _NAME_RULES[pattern][kind]
                return (choice, f"model_type={model_type}, model name matches {pattern!r}") if choice else None
        choice = _MODEL_TYPES[model_type][kind]
        return (choice, f"model_type={model_type}") if choice else None
    for pattern, tool, reasoning in _NAMES if name else ():
        if re.search(pattern, name):
            choice = (tool, reasoning)[kind]
            return (choice, f"model name matches {pattern!r}") if choice else None
    return None


def explain_detection(*, chat_template: str | None = None, model_type: str | None = None,
                      model_name: str | None = None, special_tokens: Iterable[str] | None = None,
                      tokenizer_config: dict | None = None, pinned_tool: str | None = None,
                      pinned_reasoning: str | None = None) -> dict[str, str | None]:
    """Choose the parsers and give the reason for each choice.

    Args:
        chat_template: The chat template source (else taken from ``tokenizer_config``).
        model_type: ``config.json`` ``model_type``.
        model_name: Repository or directory name (a tie-breaker).
        special_tokens: Added/special token strings (else from ``tokenizer_config``).
        tokenizer_config: Parsed ``tokenizer_config.json``.
        pinned_tool: Tool parser set in the config (always wins).
        pinned_reasoning: Reasoning parser set in the config (always wins).

    Returns:
        ``{"tool_parser", "tool_reason", "reasoning_parser", "reasoning_reason"}``. A
        parser is None when the chat template shows no such format of its own (the router
        may still sniff tool calls); with nothing to go on at all the tool parser is
        ``"auto"`` and the reasoning parser None.

    Raises:
        ValueError: A pinned name is unknown.
    """
    config = tokenizer_config or {}
    template = chat_template if chat_template is not None else _template_of(config)
    tokens = set(special_tokens) if special_tokens is not None else _tokens_of(config)
    meta_tool, meta_reasoning = _from_metadata(config)
    tool = _first(
        (tool_parser_name(pinned_tool), "pinned in config") if pinned_tool else None,
        meta_tool,
        _rule_choice(_TOOL_TEMPLATE, template, "chat template contains"),
        _template_without_tools(template),
        _rule_choice(_TOOL_TOKENS, tokens, "special token"),
        _by_model(model_type, model_name, 0),
    ) or ("auto", "none found: output sniffing (auto)")
    reasoning = _first(
        (reasoning_parser_name(pinned_reasoning), "pinned in config") if pinned_reasoning else None,
        meta_reasoning,
        _rule_choice(_REASONING_TEMPLATE, template, "chat template contains"),
        _template_without_thinking(template),
        _rule_choice(_REASONING_TOKENS, tokens, "special token"),
        _non_thinking_release(model_name),
        _think_token(tokens, model_type, model_name),
        _by_model(model_type, model_name, 1),
    ) or (None, "none found: no reasoning markers")
    return {"tool_parser": tool[0], "tool_reason": tool[1], "reasoning_parser": reasoning[0],
            "reasoning_reason": reasoning[1]}


def _template_without_tools(template: str | None) -> tuple[None, str] | None:
    """No tool parser when the template shows no tool-call format, or one no parser reads.

    The template is what the model was tuned on: a name or architecture guess (Gemma 2 ->
    pythonic) would only parse calls the model was never taught to make.
    """
    if not template or not template.strip():
        return None
    found = _match(_UNPARSED_TOOL_TEMPLATE, template)
    if found:
        return None, f"chat template teaches a format no parser reads ({found[1]}: {_quote(found[0])})"
    return None if _TOOL_WORDS.search(template) else (None, "chat template has no tool-call format")


def _template_without_thinking(template: str | None) -> tuple[None, str] | None:
    """No reasoning parser when the template never mentions thinking (an instruct model)."""
    if not template or not template.strip() or _THINKING_WORDS.search(template):
        return None
    return None, "chat template has no thinking"


def _non_thinking_release(model_name: str | None) -> tuple[None, str] | None:
    name = (model_name or "").lower()
    pattern = next((p for p in _NON_THINKING if re.search(p, name)), None)
    return (None, f"model name matches {pattern!r} (a release without thinking)") if pattern else None


def _first(*choices: tuple[str | None, str] | None) -> tuple[str | None, str] | None:
    return next((c for c in choices if c is not None), None)


def _rule_choice(rules: list[Rule], haystack: str | set[str] | None, prefix: str) -> tuple[str, str] | None:
    if not haystack:
        return None
    found = _match(rules, haystack)
    return (found[1], f"{prefix} {_quote(found[0]) if 'template' in prefix else ' '.join(found[0])}") if found else None


def _think_token(tokens: set[str], model_type: str | None, model_name: str | None) -> tuple[str, str] | None:
    """A ``<think>`` token: the family comes from the model, else the generic parser."""
    if "</think>" not in tokens:
        return None
    family = _by_model(model_type, model_name, 1)
    return (family[0] if family else "qwen3"), "special token </think>" + (f" ({family[1]})" if family else "")


def detect_parsers(*, chat_template: str | None = None, model_type: str | None = None,
                   model_name: str | None = None, special_tokens: Iterable[str] | None = None,
                   **extra: Any) -> dict[str, str | None]:
    """Choose the tool-call and reasoning parsers for a checkpoint.

    Args:
        chat_template: The chat template source.
        model_type: ``config.json`` ``model_type``.
        model_name: Repository or directory name.
        special_tokens: Added/special token strings.
        **extra: ``tokenizer_config``, ``pinned_tool``, ``pinned_reasoning`` as in
            ``explain_detection``.

    Returns:
        ``{"tool_parser": str | None, "reasoning_parser": str | None}``.
    """
    found = explain_detection(chat_template=chat_template, model_type=model_type, model_name=model_name,
                              special_tokens=special_tokens, **extra)
    return {"tool_parser": found["tool_parser"], "reasoning_parser": found["reasoning_parser"]}
