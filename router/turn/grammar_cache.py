"""The grammars one model's recent requests asked for, kept by everything they are built from.

Agents send the same response format or tool set turn after turn; checking its schemas (an
llguidance compile each) and writing its grammar then happens on the first turn only. An entry's
key holds the canonical text of what the builder reads (the schema, or the chosen tools' names and
parameters) and every option it reads, and the entry is built from its key alone, so two requests
share an entry only when they would build the same grammar. Canonical text keeps each object's
key order: llguidance writes an object's properties in schema order, so reordered properties are
another grammar. The tokenizer is the cache's own (markers that are added tokens are written as
token ids): a handle that loads a new tokenizer starts with an empty cache.

Used from the router's event loop only (no lock).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from router.errors import InvalidRequestError
from router.turn.structured import OutputFormat, Thinking, output_grammar_text, schema_problem
from router.turn.tool_grammar import lazy_tool_call_grammar, tool_call_grammar

logger = logging.getLogger(__name__)

__all__ = ["CACHED_GRAMMARS", "FormatKey", "GrammarCache", "ToolsKey", "canonical_json"]

# Distinct grammars kept per model: a team's agents and their tool sets, with room to spare.
CACHED_GRAMMARS = 256
# Distinct schemas whose check is kept (a tool set of 12 holds 12).
CACHED_SCHEMA_CHECKS = 1024

_V = TypeVar("_V")


def canonical_json(value: Any) -> str:
    """JSON text of ``value`` in its own key order, without insignificant whitespace."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class FormatKey:
    """A response format's grammar: the JSON (any object, or this schema) after the reasoning."""

    kind: Literal["json_object", "json_schema"]
    schema_json: str  # canonical_json of the schema ("" for json_object)
    reasoning_parser: str | None
    thinking: Thinking


@dataclass(frozen=True)
class ToolsKey:
    """A tool-call grammar: ``required`` (one call or several, or the ``named`` one) or ``lazy``
    (free text, a call once opened follows its schema)."""

    mode: Literal["required", "lazy"]
    tools_json: str  # canonical_json of [[name, parameters], ...] of the tools the grammar covers
    tool_parser: str | None
    named: str | None
    parallel: bool
    reasoning_parser: str | None
    thinking: Thinking


@dataclass(frozen=True)
class ToolGrammar:
    """What a tool set's grammar came to: its text ("" when the family has none), or why a
    schema of the tools cannot be enforced (the request then keeps prompting)."""

    grammar: str
    problem: str | None = None


class _Lru(Generic[_V]):
    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._entries: OrderedDict[Hashable, _V] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], _V]) -> tuple[_V, bool]:
        """The entry for ``key`` and whether it was there (else it is built and kept)."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key], True
        value = self._entries[key] = build()
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return value, False

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class GrammarCache:
    """One model's grammars by ``FormatKey`` / ``ToolsKey``, and its schema checks by schema text."""

    def __init__(self, max_entries: int = CACHED_GRAMMARS, max_schema_checks: int = CACHED_SCHEMA_CHECKS) -> None:
        self._grammars: _Lru[str | ToolGrammar] = _Lru(max_entries)
        self._problems: _Lru[str | None] = _Lru(max_schema_checks)
        self._tokenizer: Any = None
        self.hits = 0  # requests served a kept grammar
        self.misses = 0  # grammars built
        self.schema_checks = 0  # schemas compiled by llguidance to check them

    def __len__(self) -> int:
        return len(self._grammars)

    def output_grammar(self, fmt: OutputFormat, *, tokenizer, reasoning_parser: str | None, thinking: Thinking) -> str:
        """``structured.output_grammar``'s grammar for ``fmt``, built once per distinct key.

        Raises:
            InvalidRequestError: The schema uses what the grammar engine cannot enforce (named at
                this request's ``fmt.param``: the same schema may come from another API's field).
        """
        schema = fmt.schema if fmt.kind == "json_schema" else None
        key = FormatKey(fmt.kind, canonical_json(schema) if schema is not None else "", reasoning_parser, thinking)
        problem = self._schema_problem(key.schema_json or canonical_json({"type": "object"}))
        if problem:
            raise InvalidRequestError(f"{fmt.param}: the JSON schema cannot be enforced: {problem}", param=fmt.param)
        return self._entry(key, tokenizer, lambda: _build_format(key, tokenizer))

    def tool_grammar(self, tools: list[dict[str, Any]], *, mode: Literal["required", "lazy"], tool_parser: str | None,
                     named: str | None, parallel: bool, tokenizer, reasoning_parser: str | None, thinking: Thinking) -> ToolGrammar:
        """The grammar of ``tool_grammar.tool_call_grammar`` (``required``) or of
        ``lazy_tool_call_grammar`` (``lazy``) over ``tools`` (OpenAI function shape), built once
        per distinct key; with a problem instead when a schema of the tools cannot be enforced."""
        functions = [[tool["function"]["name"], tool["function"].get("parameters")] for tool in tools]
        key = ToolsKey(mode, canonical_json(functions), tool_parser, named if mode == "required" else None,
                       parallel if mode == "required" else False, reasoning_parser, thinking)
        return self._entry(key, tokenizer, lambda: self._build_tools(key, tokenizer))

    def _entry(self, key: FormatKey | ToolsKey, tokenizer, build: Callable[[], _V]) -> _V:
        if tokenizer is not self._tokenizer:
            self._grammars.clear()
            self._tokenizer = tokenizer
        value, kept = self._grammars.get(key, build)
        if kept:
            self.hits += 1
        else:
            self.misses += 1
        return value

    def _schema_problem(self, schema_json: str) -> str | None:
        def check() -> str | None:
            self.schema_checks += 1
            return schema_problem(json.loads(schema_json))

        return self._problems.get(schema_json, check)[0]

    def _build_tools(self, key: ToolsKey, tokenizer) -> ToolGrammar:
        functions = json.loads(key.tools_json)
        chosen = [parameters for name, parameters in functions if key.named is None or name == key.named]
        for parameters in chosen:
            problem = self._schema_problem(canonical_json(parameters or {"type": "object"}))
            if problem:
                return ToolGrammar("", problem)
        tools = [{"type": "function", "function": {"name": name, "parameters": parameters}} for name, parameters in functions]
        options = {"tool_parser": key.tool_parser, "tokenizer": tokenizer, "reasoning_parser": key.reasoning_parser,
                   "thinking": key.thinking}
        if key.mode == "lazy":
            return ToolGrammar(lazy_tool_call_grammar(tools, **options) or "")
        return ToolGrammar(tool_call_grammar(tools, named=key.named, parallel=key.parallel, **options) or "")


def _build_format(key: FormatKey, tokenizer) -> str:
    schema = json.loads(key.schema_json) if key.schema_json else {"type": "object"}
    return output_grammar_text(schema, tokenizer=tokenizer, reasoning_parser=key.reasoning_parser, thinking=key.thinking)
