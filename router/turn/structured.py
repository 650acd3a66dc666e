"""Structured outputs: the grammar a request's output must follow, for the worker's constrained decoding.

A response format (`json_object`, or `json_schema` with its schema) becomes an llguidance Lark
grammar: the JSON, after the model's reasoning when it has any. Thinking stays free: with a
reasoning parser, the grammar first lets the model write its think block (or, when the prompt
opened one, the rest of it) up to the closing tag, then constrains what follows. Schemas are
checked here, so an unsupported keyword is the client's 400 naming it, not a silent fallback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from parsers.registry import load_reasoning_parser
from router.errors import InvalidRequestError
from router.turn.parser_choice import prompt_closes_thinking, prompt_opens_thinking
from router.turn.fields import JsonPath, as_object, kind_of, opt_bool, opt_object, opt_str, req_object

__all__ = ["JSON_OPTIONS", "OutputFormat", "anthropic_output_format", "chat_response_format", "lark_tag", "with_reasoning", "output_grammar", "output_grammar_text", "responses_text_format", "schema_problem", "thinking_state"]

# Whitespace the JSON may carry between its tokens: one space (json.dumps) or one newline with
# indentation (pretty-printed), so that a model cannot pad the output without end.
JSON_OPTIONS = {"whitespace_pattern": r"(\n {0,16}| )?"}
# After the reasoning, the few newlines models put before their answer.
_GAP = r"/[ \t\n]{0,4}/"


@dataclass(frozen=True)
class OutputFormat:
    """What the output must be: any JSON object, or JSON valid against ``schema``."""

    kind: Literal["json_object", "json_schema"]
    schema: dict[str, Any] | None = None
    name: str = ""
    param: str = "response_format"  # where the API took it from, for errors


def chat_response_format(value: Any, at: JsonPath) -> OutputFormat | None:
    """Chat's ``response_format``: ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``,
    ``{"type": "json_object"}`` or ``{"type": "text"}`` (None: free text)."""
    if value is None:
        return None
    kind = kind_of(as_object(value, at), at)
    if kind == "json_schema":
        spec = req_object(value, "json_schema", at)
        return _schema_format(spec, at / "json_schema")
    return _plain_format(kind, at)


def responses_text_format(text: Any, at: JsonPath) -> OutputFormat | None:
    """Responses' ``text.format``: the same types, the schema's fields beside ``type``."""
    fmt = _format_in(text, at)
    if fmt is None:
        return None
    kind = kind_of(fmt, at / "format")
    if kind == "json_schema":
        return _schema_format(fmt, at / "format")
    return _plain_format(kind, at / "format")


def anthropic_output_format(config: Any, at: JsonPath) -> OutputFormat | None:
    """Anthropic Messages' ``output_config.format``: ``{"type": "json_schema", "schema": {...}}``."""
    fmt = _format_in(config, at)
    if fmt is None:
        return None
    if kind_of(fmt, at / "format") != "json_schema":
        raise InvalidRequestError(f"{at / 'format' / 'type'}: Input should be 'json_schema'", param=str(at / "format" / "type"))
    return _schema_format(fmt, at / "format")


def _format_in(container: Any, at: JsonPath) -> dict[str, Any] | None:
    """The ``format`` object of an optional ``text`` / ``output_config`` object."""
    return None if container is None else opt_object(as_object(container, at), "format", at)


def _schema_format(spec: dict[str, Any], at: JsonPath) -> OutputFormat:
    schema = req_object(spec, "schema", at)
    opt_bool(spec, "strict", at)  # enforced either way: the grammar admits nothing else
    opt_str(spec, "description", at)
    return OutputFormat("json_schema", schema, opt_str(spec, "name", at) or "", param=str(at / "schema"))


def _plain_format(kind: str, at: JsonPath) -> OutputFormat | None:
    if kind == "json_object":
        return OutputFormat("json_object", param=str(at))
    if kind == "text":
        return None
    raise InvalidRequestError(f"{at}.type must be 'text', 'json_object' or 'json_schema'.", param=f"{at}.type")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why llguidance cannot enforce ``schema`` (the first line of its message), or None."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(_with_options(schema)))
    problem = llguidance.LLMatcher.validate_grammar(grammar)
    return problem.splitlines()[0] if problem else None


Thinking = Literal["open", "closed", "maybe"]
"""Where the prompt leaves the model's reasoning: inside an open think block, after a closed one
(thinking off), or before the answer with a think block the model may write."""


def output_grammar(fmt: OutputFormat, *, tokenizer, reasoning_parser: str | None, thinking: Thinking) -> str:
    """The llguidance grammar for ``fmt``, after the reasoning block when the model thinks.

    Args:
        fmt: The response format.
        tokenizer: The model's Hugging Face tokenizer (reasoning tags that are single added
            tokens are written as tokens, which is how llguidance sees them).
        reasoning_parser: The model's reasoning parser name, or None.
        thinking: Where the prompt leaves the reasoning (``Thinking``).

    Raises:
        InvalidRequestError: The schema uses what the grammar engine cannot enforce.
    """
    schema = fmt.schema if fmt.kind == "json_schema" else {"type": "object"}
    problem = schema_problem(schema)
    if problem:
        raise InvalidRequestError(f"{fmt.param}: the JSON schema cannot be enforced: {problem}", param=fmt.param)
    return output_grammar_text(schema, tokenizer=tokenizer, reasoning_parser=reasoning_parser, thinking=thinking)


def output_grammar_text(schema: dict[str, Any], *, tokenizer, reasoning_parser: str | None, thinking: Thinking) -> str:
    """``output_grammar``'s grammar for a schema already checked by ``schema_problem``."""
    import llguidance

    body = "%json " + json.dumps(_with_options(schema))
    lark = with_reasoning(body, tokenizer, None if thinking == "closed" else reasoning_parser, thinking)
    return llguidance.LLMatcher.grammar_from_lark(lark)


def thinking_state(prompt_text: str, reasoning_parser: str | None) -> Thinking:
    """Where ``prompt_text`` leaves a model with this reasoning parser (``Thinking``)."""
    if prompt_opens_thinking(prompt_text, reasoning_parser):
        return "open"
    return "closed" if prompt_closes_thinking(prompt_text, reasoning_parser) else "maybe"


def _with_options(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "x-guidance": {**JSON_OPTIONS, **schema.get("x-guidance", {})}}


def with_reasoning(body: str, tokenizer, reasoning_parser: str | None, thinking: Thinking) -> str:
    """A Lark grammar: ``start`` = the reasoning the model may write, then ``answer: body``
    (``body`` may go on with rules of its own on the lines after its first)."""
    rules = [f"answer: {body}"]
    if reasoning_parser is None:
        return "start: answer\n" + "\n".join(rules) + "\n"
    parser = load_reasoning_parser(reasoning_parser)
    close = lark_tag(parser.close_tags[0], tokenizer)
    if close.startswith("<["):  # a token: free text cannot contain it, so it ends the thinking
        rules.append(f"think_rest: THINK_TEXT {close}")
        rules.append(r"THINK_TEXT: /(.|\n)*/")
    else:  # text: the first occurrence ends the thinking
        rules.append(rf"think_rest[lazy]: /(.|\n)*/ {close}")
    rules.append(f"GAP: {_GAP}")
    if thinking == "open" or parser.implicit_open:
        start = "start: think_rest GAP answer"
    else:
        rules.append(f"think: {lark_tag(parser.open_tags[0], tokenizer)} think_rest GAP")
        start = "start: think? answer"
    return start + "\n" + "\n".join(rules) + "\n"


def lark_tag(text: str, tokenizer) -> str:
    """A marker in Lark: ``<[id]>`` when the tokenizer has it as one added token, else quoted text."""
    token_id = tokenizer.convert_tokens_to_ids(text)
    if isinstance(token_id, int) and token_id in getattr(tokenizer, "added_tokens_decoder", {}):
        return f"<[{token_id}]>"
    return json.dumps(text)
