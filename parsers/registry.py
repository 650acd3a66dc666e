"""Parser names -> classes, loaded lazily on first use.

Canonical names are vLLM's ``--tool-call-parser`` / ``--reasoning-parser`` names so
users can carry their flags over; SGLang, llama.cpp (format names, lower-cased) and
mlx-lm (``tool_parser_type``) spellings are aliases.  Look-ups ignore case and treat
``-`` and ``_`` alike.
"""

from __future__ import annotations

import importlib
from functools import cache

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "load_reasoning_parser",
    "load_tool_parser",
    "reasoning_parser_name",
    "tool_parser_name",
]

_T = "parsers.tools."
_R = "parsers.reasoning."

TOOL_PARSERS: dict[str, str] = {
    "hermes": _T + "hermes:HermesToolParser",
    "granite4": _T + "hermes:Granite4ToolParser",
    "ernie45": _T + "hermes:Ernie45ToolParser",
    "qwen3_coder": _T + "qwen3_coder:Qwen3CoderToolParser",
    "qwen3_xml": _T + "qwen3_coder:Qwen3XmlToolParser",
    "seed_oss": _T + "qwen3_coder:SeedOssToolParser",
    "step3p5": _T + "qwen3_coder:Step3p5ToolParser",
    "llama3_json": _T + "llama:Llama3JsonToolParser",
    "gigachat3": _T + "json_wrapped:GigaChat3ToolParser",
    "pythonic": _T + "pythonic:PythonicToolParser",
    "llama4_pythonic": _T + "pythonic:Llama4PythonicToolParser",
    "lfm2": _T + "pythonic:Lfm2ToolParser",
    "olmo3": _T + "pythonic:Olmo3ToolParser",
    "mistral": _T + "mistral:MistralToolParser",
    "deepseek_v3": _T + "deepseek:DeepSeekV3ToolParser",
    "deepseek_v31": _T + "deepseek:DeepSeekV31ToolParser",
    "deepseek_v32": _T + "deepseek:DeepSeekV32ToolParser",
    "deepseek_v4": _T + "deepseek:DeepSeekV4ToolParser",
    "glm45": _T + "glm:Glm45ToolParser",
    "glm47": _T + "glm:Glm47ToolParser",
    "longcat": _T + "glm:LongcatToolParser",
    "hy_v3": _T + "glm:HyV3ToolParser",
    "kimi_k2": _T + "kimi:KimiK2ToolParser",
    "openai": _T + "openai:OpenAIToolParser",
    "minimax_m2": _T + "minimax:MinimaxM2ToolParser",
    "minimax": _T + "minimax:MinimaxM1ToolParser",
    "step3": _T + "minimax:Step3ToolParser",
    "granite": _T + "json_wrapped:GraniteToolParser",
    "granite-20b-fc": _T + "json_wrapped:Granite20bFcToolParser",
    "phi4_mini_json": _T + "json_wrapped:Phi4MiniJsonToolParser",
    "xlam": _T + "json_wrapped:XlamToolParser",
    "hunyuan_a13b": _T + "json_wrapped:HunyuanA13bToolParser",
    "jamba": _T + "json_wrapped:JambaToolParser",
    "internlm": _T + "json_wrapped:InternLmToolParser",
    "apertus": _T + "json_wrapped:ApertusToolParser",
    "functiongemma": _T + "gemma:FunctionGemmaToolParser",
    "gemma4": _T + "gemma:Gemma4ToolParser",
    "cohere_command3": _T + "cohere:CohereCommand3ToolParser",
    "cohere_command4": _T + "cohere:CohereCommand4ToolParser",
    # vLLM's Laguna parser reads GLM-4.x key/value calls (name, then optional newline).
    "poolside_v1": _T + "glm:Glm47ToolParser",
    "auto": _T + "auto:AutoToolParser",
}

TOOL_ALIASES: dict[str, str] = {
    # SGLang
    "qwen25": "hermes", "qwen": "hermes", "llama3": "llama3_json", "deepseekv3": "deepseek_v3",
    "deepseekv31": "deepseek_v31", "deepseekv32": "deepseek_v32", "deepseekv4": "deepseek_v4",
    "glm": "glm45", "gpt-oss": "openai", "minimax-m2": "minimax_m2", "hunyuan": "hunyuan_a13b",
    "interns1": "internlm", "apertus2509": "apertus",
    # vLLM spellings that share a parser
    "llama4_json": "llama3_json", "internlm2": "internlm", "mimo": "qwen3_coder",
    # mlx-lm tool_parser_type
    "json_tools": "hermes", "function_gemma": "functiongemma", "laguna": "glm47",
    # llama.cpp chat formats
    "hermes_2_pro": "hermes", "qwen3_coder_xml": "qwen3_coder", "llama_3_x": "llama3_json",
    "llama_3_x_with_builtin_tools": "llama3_json", "mistral_nemo": "mistral", "magistral": "mistral",
    "deepseek_r1": "deepseek_v3", "deepseek_v3_1": "deepseek_v31", "glm_4_5": "glm45",
    "gpt_oss": "openai", "firefunction_v2": "phi4_mini_json", "granite_4": "granite4",
}

REASONING_PARSERS: dict[str, str] = {
    "qwen3": _R + "think:Qwen3ReasoningParser",
    "deepseek_r1": _R + "think:DeepSeekR1ReasoningParser",
    "deepseek_v3": _R + "think:DeepSeekV3ReasoningParser",
    "glm45": _R + "think:Glm45ReasoningParser",
    "kimi_k2": _R + "think:KimiK2ReasoningParser",
    "minimax_m2": _R + "think:MinimaxM2ReasoningParser",
    "minimax_m2_append_think": _R + "think:MinimaxM2AppendThinkReasoningParser",
    "step3": _R + "think:Step3ReasoningParser",
    "step3p5": _R + "think:Step3p5ReasoningParser",
    "olmo3": _R + "think:Olmo3ReasoningParser",
    "seed_oss": _R + "tagged:SeedOssReasoningParser",
    "mistral": _R + "tagged:MistralReasoningParser",
    "gemma4": _R + "tagged:Gemma4ReasoningParser",
    "hunyuan_a13b": _R + "tagged:HunyuanA13bReasoningParser",
    "ernie45": _R + "tagged:Ernie45ReasoningParser",
    "granite": _R + "tagged:GraniteReasoningParser",
    "openai_gptoss": _T + "openai:GptOssReasoningParser",
    "deepseek_v4": _R + "think:DeepSeekV4ReasoningParser",
    "holo2": _R + "think:Holo2ReasoningParser",
    "hy_v3": _R + "think:HyV3ReasoningParser",
    "poolside_v1": _R + "think:PoolsideV1ReasoningParser",
    "nemotron_v3": _R + "nemotron:NemotronV3ReasoningParser",
    "cohere_command3": _R + "cohere:CohereCommand3ReasoningParser",
    "cohere_command4": _R + "cohere:CohereCommand4ReasoningParser",
}

REASONING_ALIASES: dict[str, str] = {
    "deepseek-r1": "deepseek_r1", "deepseek-v3": "deepseek_v3", "glm47": "glm45", "glm": "glm45",
    "gpt-oss": "openai_gptoss", "openai": "openai_gptoss", "kimi": "kimi_k2",
    "minimax": "minimax_m2", "minimax-append-think": "minimax_m2_append_think",
    "deepseek": "deepseek_r1", "deepseek-legacy": "deepseek_r1", "qwen3_5": "qwen3",
    "hunyuan": "hunyuan_a13b", "ernie": "ernie45",
    # vLLM spellings that share a parser
    "mimo": "qwen3",
}


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _resolve(name: str, table: dict[str, str], aliases: dict[str, str], kind: str) -> str:
    wanted = _key(name)
    for canonical in table:
        if _key(canonical) == wanted:
            return canonical
    for alias, canonical in aliases.items():
        if _key(alias) == wanted:
            return canonical
    known = ", ".join(sorted(table))
    raise ValueError(f"unknown {kind} parser {name!r}; known: {known}")


def tool_parser_name(name: str) -> str:
    """Canonical tool-parser name for a name or alias.

    Raises:
        ValueError: The name is unknown (the message lists the known names).
    """
    return _resolve(name, TOOL_PARSERS, TOOL_ALIASES, "tool")


def reasoning_parser_name(name: str) -> str:
    """Canonical reasoning-parser name for a name or alias.

    Raises:
        ValueError: The name is unknown (the message lists the known names).
    """
    return _resolve(name, REASONING_PARSERS, REASONING_ALIASES, "reasoning")


@cache
def _load(path: str) -> type:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_tool_parser(name: str) -> type:
    """Import and return the tool-parser class for a name or alias."""
    return _load(TOOL_PARSERS[tool_parser_name(name)])


def load_reasoning_parser(name: str) -> type:
    """Import and return the reasoning-parser class for a name or alias."""
    return _load(REASONING_PARSERS[reasoning_parser_name(name)])
