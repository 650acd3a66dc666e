"""Tool calls by constrained decoding: with ``tool_choice`` required or a named function, the output
is the model family's own tool-call format, with each call's arguments valid against its tool's
JSON schema.

The grammar is written in the family's syntax, so the output parser reads it as it reads any
call: Hermes ``<tool_call>{"name", "arguments"}</tool_call>``, Llama 3 JSON
``{"name", "parameters"}`` and Qwen3-Coder's XML (``<function=N><parameter=K>``: string values as
raw text, others as JSON). Families without a grammar here keep today's prompting
(``GRAMMAR_FAMILIES`` says which). With ``tool_choice`` auto and a ``strict`` tool, the text
stays free and a call, once its marker opens it, follows the same grammar (``lazy_tool_call_grammar``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from parsers.registry import tool_parser_name
from router.turn.structured import JSON_OPTIONS, Thinking, lark_tag, with_reasoning

__all__ = ["GRAMMAR_FAMILIES", "grammar_family", "lazy_tool_call_grammar", "tool_call_grammar"]


def _function(tool: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    function = tool["function"]
    return function["name"], function.get("parameters") or {"type": "object"}


def _json(schema: dict[str, Any]) -> str:
    return "%json " + json.dumps({**schema, "x-guidance": {**JSON_OPTIONS, **schema.get("x-guidance", {})}})


def _json_call(args_key: str) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """The schema of one ``{"name": N, args_key: {...}}`` object, any of the tools."""
    def schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
        options = []
        for tool in tools:
            name, parameters = _function(tool)
            options.append({"type": "object", "properties": {"name": {"const": name}, args_key: parameters},
                            "required": ["name", args_key], "additionalProperties": False})
        return options[0] if len(options) == 1 else {"anyOf": options}
    return schema


def _hermes(tools: list[dict[str, Any]], tokenizer) -> tuple[str, str, list[str]]:
    body = _json(_json_call("arguments")(tools))
    return f'{lark_tag("<tool_call>", tokenizer)} "\\n" call_body "\\n" {lark_tag("</tool_call>", tokenizer)}', '"\\n"', [
        f"call_body: {body}"]


def _llama3_json(tools: list[dict[str, Any]], tokenizer) -> tuple[str, str, list[str]]:
    return "call_body", '"; "', [f"call_body: {_json(_json_call('parameters')(tools))}"]


def _qwen3_coder(tools: list[dict[str, Any]], tokenizer) -> tuple[str, str, list[str]]:
    """One alternative per tool; its parameters in schema order, the required ones required."""
    rules, functions = [], []
    for t, tool in enumerate(tools):
        name, parameters = _function(tool)
        required = set(parameters.get("required", ()))
        parts = []
        for p, (key, schema) in enumerate((parameters.get("properties") or {}).items()):
            rule = f"t{t}_p{p}"
            rules.append(f'{rule}: "<parameter={key}>\\n" {_xml_value(f"{rule}_v", schema, rules)} "\\n"')
            parts.append(rule if key in required else f"{rule}?")
        rules.append(f't{t}: "<function={name}>\\n" {" ".join(parts)} "</function>"')
        functions.append(f"t{t}")
    rules.append("call_body: " + " | ".join(functions))
    call = f'{lark_tag("<tool_call>", tokenizer)} "\\n" call_body "\\n" {lark_tag("</tool_call>", tokenizer)}'
    return call, '"\\n"', rules


def _xml_value(rule: str, schema: dict[str, Any], rules: list[str]) -> str:
    """A parameter's value and its closing tag as Qwen3-Coder writes them: strings as raw text,
    everything else as JSON (the parser types values by the same schema)."""
    close = '"\\n</parameter>"'
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if choices is not None and all(isinstance(c, str) for c in choices):
        return "(" + " | ".join(json.dumps(c) for c in choices) + ") " + close
    if schema.get("type") == "string":
        # Raw text up to the closing tag (its first occurrence ends it), as long as the schema
        # allows; a pattern or format is not enforced on raw text.
        length = f"{{{schema.get('minLength', 0)},{schema['maxLength']}}}" if "maxLength" in schema else "*"
        rules.append(f"{rule}[lazy]: /(.|\\n){length}/ {close}")
        return rule
    return f"{_json(schema)} {close}"


# Canonical tool parser → (call rule, separator between parallel calls, extra rules).
GRAMMAR_FAMILIES: dict[str, Callable[[list[dict[str, Any]], Any], tuple[str, str, list[str]]]] = {
    "hermes": _hermes,
    "llama3_json": _llama3_json,
    "qwen3_coder": _qwen3_coder,
    "qwen3_xml": _qwen3_coder,  # vLLM's other parser of the same Qwen3-Coder format
}


def tool_call_grammar(tools: list[dict[str, Any]], *, tool_parser: str | None, named: str | None, parallel: bool,
                      tokenizer, reasoning_parser: str | None, thinking: Thinking) -> str | None:
    """The grammar of a reply that is one call (or several, with ``parallel``) of ``tools``, or of the
    ``named`` one; None when the family has no grammar here (the caller keeps prompting).

    Args:
        tools: The request's tools, OpenAI function shape.
        tool_parser: The model's tool parser name (any alias).
        named: The function ``tool_choice`` names, or None for any of them.
        parallel: Whether several calls may follow one another.
        tokenizer: The model's tokenizer (markers that are added tokens are written as tokens).
        reasoning_parser: The model's reasoning parser, or None: the calls follow its reasoning.
        thinking: Where the prompt leaves the reasoning.
    """
    import llguidance

    family = grammar_family(tool_parser)
    if family is None:
        return None
    chosen = [tool for tool in tools if named is None or _function(tool)[0] == named]
    call, separator, rules = GRAMMAR_FAMILIES[family](chosen, tokenizer)
    calls = f"one_call ({separator} one_call)*" if parallel else "one_call"
    body = f"{calls}\none_call: {call}\n" + "\n".join(rules)
    lark = with_reasoning(body, tokenizer, None if thinking == "closed" else reasoning_parser, thinking)
    return llguidance.LLMatcher.grammar_from_lark(lark)


def lazy_tool_call_grammar(tools: list[dict[str, Any]], *, tool_parser: str | None, tokenizer, reasoning_parser: str | None,
                           thinking: Thinking) -> str | None:
    """``tool_choice`` auto with a ``strict`` tool: free text, but once the model opens a call
    (the family's ``<tool_call>`` marker) the rest of the call follows its schema; None for a
    family with no grammar here or no call marker (Llama 3 JSON calls are bare)."""
    import llguidance

    family = grammar_family(tool_parser)
    if family is None or family == "llama3_json":
        return None
    call, _, rules = GRAMMAR_FAMILIES[family](tools, tokenizer)
    opener = lark_tag("<tool_call>", tokenizer)
    rest = call[len(opener):]
    if opener.startswith("<["):  # a token: free text cannot contain it, so it opens the call
        segment = f"segment: FREE {opener}{rest}"
    else:  # text: its first occurrence opens the call
        segment = f"segment: free_to_call{rest}\nfree_to_call[lazy]: /(.|\\n)*/ {opener}"
    body = "segment* FREE\n" + segment + "\nFREE: /(.|\\n)*/\n" + "\n".join(rules)
    lark = with_reasoning(body, tokenizer, None if thinking == "closed" else reasoning_parser, thinking)
    return llguidance.LLMatcher.grammar_from_lark(lark)


def grammar_family(tool_parser: str | None) -> str | None:
    """The family of ``GRAMMAR_FAMILIES`` this parser name (any alias) writes, or None."""
    if tool_parser is None:
        return None
    try:
        name = tool_parser_name(tool_parser)
    except ValueError:
        return None
    return name if name in GRAMMAR_FAMILIES else None
