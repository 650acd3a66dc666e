"""Gemma 4 and FunctionGemma ``call:NAME{key:value,...}`` tool calls.

Gemma 4: ``<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,n:3,o:{a:true}}<tool_call|>``;
strings sit between ``<|"|>`` delimiter tokens, keys are bare (or quoted, as in
``{<|"|>3<|"|>:<|"|>x<|"|>}``), objects and arrays nest, names may contain ``-`` and
``.``, and several calls may follow each other.  FunctionGemma:
``<start_function_call>call:NAME{k:<escape>v<escape>,n:3}<end_function_call>``, where
numbers and booleans may be escaped too: an escaped value is typed by the schema, and
read as JSON when the schema says nothing (``<escape>42<escape>`` -> 42, as vLLM does).
Bare numbers follow vLLM's reading, so ``108.`` is 108.0; ``key:`` with no value is "",
and a key may follow a closed value without a comma (as vLLM reads both).  Calls are emitted whole when
their end marker arrives (streaming partial numbers is how ``108.`` became ``108.0``);
a FunctionGemma call complete but for its end marker still counts at the end of output.
"""

from __future__ import annotations

import json
import math
import re

from ..base import RawCall
from ..block import Block, BufferedBlock
from ..engine import ToolStream
from ..schema import ToolSet, coerce_value, finite_json, schema_types

__all__ = ["FunctionGemmaToolParser", "Gemma4ToolParser", "parse_call_syntax"]

_CALL = re.compile(r"\s*call:(?P<name>[\w.\-]+)\s*")
_BARE = re.compile(r"[^,}\]:]*")
_KEY = re.compile(r"\s*([\w.\-]+)\s*:")
# Numerals as Python reads them (vLLM's int()/float()): ``108.``, ``.5``, ``+3``, ``007``.
_PY_NUMBER = re.compile(r"[+-]?(?:(?P<int>\d+)|\d+\.\d*|\.\d+)(?P<exp>[eE][+-]?\d+)?")


class _Syntax:
    def __init__(self, text: str, delim: str, *, json_strings: bool = False) -> None:
        self.t, self.d = text, delim
        self.json_strings = json_strings  # untyped delimited values read as JSON (FunctionGemma)

    def ws(self, i: int) -> int:
        while i < len(self.t) and self.t[i] in " \t\r\n":
            i += 1
        return i

    def expect(self, i: int, ch: str) -> int:
        i = self.ws(i)
        if not self.t.startswith(ch, i):
            raise ValueError(f"expected {ch!r}")
        return i + 1

    def string(self, i: int) -> tuple[str, int]:
        end = self.t.find(self.d, i + len(self.d))
        if end < 0:
            raise ValueError("unterminated string")
        return self.t[i + len(self.d) : end], end + len(self.d)

    def value(self, i: int) -> tuple[object, int, bool]:
        """Returns (value, next index, was a delimited string)."""
        i = self.ws(i)
        if self.t.startswith(self.d, i):
            text, i = self.string(i)
            return text, i, True
        if self.t.startswith("{", i):
            obj, i = self.mapping(i)
            return obj, i, False
        if self.t.startswith("[", i):
            items, i = [], self.ws(i + 1)
            while not self.t.startswith("]", i):
                item, i, _ = self.value(i)
                items.append(item)
                i = self.ws(i)
                if self.t.startswith(",", i):
                    i = self.ws(i + 1)
                elif not self.t.startswith("]", i):
                    raise ValueError("expected ',' or ']'")
            return items, i + 1, False
        m = _BARE.match(self.t, i)
        raw = m.group().strip()
        # ``key:`` with nothing before the next ``,``/``}`` is an empty value (vLLM reads "").
        return (_bare(raw) if raw else ""), m.end(), False

    def mapping(self, i: int, typed_for: tuple[str, ToolSet] | None = None) -> tuple[dict, int]:
        """An object; with ``typed_for`` (the call's top level) values are schema-typed."""
        out: dict = {}
        i = self.expect(i, "{")
        while True:
            i = self.ws(i)
            if self.t.startswith("}", i):
                return out, i + 1
            if self.t.startswith(self.d, i):
                key, i = self.string(i)
                i = self.expect(i, ":")
            else:
                m = _KEY.match(self.t, i)
                if not m:
                    raise ValueError("expected a key")
                key, i = m.group(1), m.end()
            value, end, quoted = self.value(i)
            if quoted and typed_for is not None:
                value = self.typed(value, typed_for[1].property_schema(typed_for[0], key))
            out.setdefault(key, value)
            i = self.ws(end)
            if self.t.startswith(",", i):
                i += 1
            elif not self.t.startswith("}", i) and not (self._closed(quoted, end) and self._key_at(i)):
                raise ValueError("expected ',' or '}'")

    def _closed(self, quoted: bool, end: int) -> bool:
        """The value ended on its own closer (a delimiter, ``}`` or ``]``), not at a comma."""
        return quoted or self.t[end - 1 : end] in ("}", "]")

    def _key_at(self, i: int) -> bool:
        """A key starts here: models drop the comma after a closed value (vLLM reads on)."""
        return self.t.startswith(self.d, i) or _KEY.match(self.t, i) is not None

    def typed(self, text: str, schema: dict | None) -> object:
        """A delimited top-level value: typed by its schema, else maybe JSON, else text."""
        if schema is not None and schema_types(schema):
            return coerce_value(text, schema)
        return _json_or_text(text) if self.json_strings else text


def _json_or_text(text: str) -> object:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if finite_json(value) else text


def _bare(raw: str) -> object:
    m = _PY_NUMBER.fullmatch(raw)
    if m:
        try:
            value = int(raw) if m.group("int") and not m.group("exp") else float(raw)
        except ValueError:  # more digits than int() accepts
            return raw
        return value if not isinstance(value, float) or math.isfinite(value) else raw
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, bool) or value is None else raw


def parse_call_syntax(body: str, delim: str, tools: ToolSet, *,
                      json_strings: bool = False) -> list[RawCall] | None:
    """Parse one or more ``call:NAME{...}`` in a block body; None if any is malformed.

    Args:
        body: The block text between the markers.
        delim: The string delimiter token.
        tools: The offered tools (their schemas type the delimited values).
        json_strings: Read a delimited value without a typed schema as JSON when it is.
    """
    syntax, calls, i = _Syntax(body, delim, json_strings=json_strings), [], 0
    while syntax.ws(i) < len(body):
        m = _CALL.match(body, i)
        if not m:
            return None
        try:
            args, i = syntax.mapping(m.end(), (m.group("name"), tools))
        except ValueError:
            return None
        calls.append(RawCall(m.group("name"), args))
    return calls or None


class Gemma4ToolParser(ToolStream):
    """Gemma 4 ``<|tool_call>call:NAME{...}<tool_call|>`` blocks."""

    start_markers = ("<|tool_call>",)
    end_markers = ("<tool_call|>",)
    drop_markers = ("<turn|>",)
    delimiter = '<|"|>'
    json_strings = False
    """Untyped delimited values stay text (vLLM's Gemma 4 parser)."""
    needs_end_marker = True
    """A call cut off before its end marker is not trusted (vLLM's Gemma 4 regex)."""

    def open_block(self, marker: str) -> Block | None:
        def parse(body: str, final: bool) -> list[RawCall] | None:
            if final and self.needs_end_marker:
                return None
            return parse_call_syntax(body, self.delimiter, self.tools, json_strings=self.json_strings)

        return BufferedBlock(self.sink, self.end_markers, parse,
                             plausible=lambda text: "call:".startswith(text.lstrip()[:5]))


class FunctionGemmaToolParser(Gemma4ToolParser):
    """FunctionGemma ``<start_function_call>call:NAME{...}<end_function_call>``."""

    start_markers = ("<start_function_call>",)
    end_markers = ("<end_function_call>",)
    drop_markers = ("<end_of_turn>",)
    delimiter = "<escape>"
    json_strings = True  # vLLM: json.loads of every escaped value
    needs_end_marker = False  # vLLM's regex also takes a call the output ends in
