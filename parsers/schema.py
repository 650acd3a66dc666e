"""The offered tools of one request, and typing of text-valued arguments by their schema.

Formats that write argument values as raw text (Qwen3-Coder XML, GLM, MiniMax, DSML,
Step-3, Gemma) lose the JSON type; this module gets it back from the tool's JSON schema
(``type`` lists, ``anyOf``/``oneOf``, ``nullable``, ``enum``), falling back to the raw
string; an object or array escaped once more, as inside a JSON string, is unescaped.
JSON formats keep the types the model wrote and never pass through here.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
from typing import Any, Literal

logger = logging.getLogger(__name__)

__all__ = ["ToolSet", "coerce_value", "finite_json", "lenient_literal", "schema_types"]

Fallback = Literal["string", "json"]
"""What an untyped value becomes: the raw ``string``, or ``json`` (parse it, else string)."""

_INT_RE = re.compile(r"[+-]?\d+\Z")
_FLOAT_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_TYPE_ALIASES = {
    "str": "string", "text": "string", "bool": "boolean", "int": "integer",
    "float": "number", "double": "number", "list": "array", "dict": "object",
}


class ToolSet:
    """The request's ``tools``, normalised for name checks and schema lookups."""

    def __init__(self, tools: list[dict] | None):
        """Index the tools by name.

        Args:
            tools: OpenAI-style ``[{"type": "function", "function": {...}}]`` entries or
                bare ``{"name", "parameters"}`` entries; ``None`` when none were sent.
        """
        self.given = tools is not None
        self._params: dict[str, dict] = {}
        for tool in tools or ():
            if not isinstance(tool, dict):
                continue
            fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            name = fn.get("name")
            if isinstance(name, str) and name:
                params = fn.get("parameters")
                self._params[name] = params if isinstance(params, dict) else {}

    @property
    def names(self) -> frozenset[str]:
        """Names of the offered functions."""
        return frozenset(self._params)

    def offered(self, name: str) -> bool:
        """True if no tools were given, or ``name`` is among them."""
        return not self.given or name in self._params

    def parameters(self, name: str) -> dict | None:
        """The function's parameters schema, or None if it was not offered."""
        return self._params.get(name)

    def property_schema(self, name: str, key: str) -> dict | None:
        """The schema of one argument, or None when unknown."""
        props = (self._params.get(name) or {}).get("properties")
        if isinstance(props, dict) and isinstance(props.get(key), dict):
            return props[key]
        return None

    def only_string(self, name: str, key: str, *, default: bool) -> bool:
        """True if the argument is typed as a string only (safe to stream as text).

        Args:
            name: Function name.
            key: Argument name.
            default: Answer when the schema says nothing about the argument.
        """
        schema = self.property_schema(name, key)
        if schema is None:
            return default
        types = schema_types(schema)
        return types == {"string"} if types else default


def schema_types(schema: dict) -> set[str]:
    """The JSON types a schema admits, with ``null`` included when it is nullable.

    Args:
        schema: A property schema.

    Returns:
        A set of JSON type names; empty when the schema does not constrain the type.
    """
    types: set[str] = set()
    raw = schema.get("type")
    if isinstance(raw, str):
        types.add(_TYPE_ALIASES.get(raw, raw))
    elif isinstance(raw, list):
        types.update(_TYPE_ALIASES.get(t, t) for t in raw if isinstance(t, str))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or ():
            if isinstance(sub, dict):
                types |= schema_types(sub)
    if not types and isinstance(schema.get("enum"), list):
        types |= {_json_type(v) for v in schema["enum"]}
    if schema.get("nullable") is True:
        types.add("null")
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def lenient_literal(text: str) -> Any:
    """Parse JSON, or failing that a Python literal (``{'a': True}``), rejecting NaN/inf.

    Args:
        text: The candidate literal.

    Returns:
        The parsed value.

    Raises:
        ValueError: Neither form parses, or the value holds a non-finite number.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            raise ValueError(f"not a literal: {exc}") from None
        value = _jsonable(value)
    if not finite_json(value):
        raise ValueError("non-finite number")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _jsonable(value: Any) -> Any:
    """Map tuples/sets (Python literals) onto JSON arrays; reject other non-JSON types."""
    if isinstance(value, (tuple, set, frozenset, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"unsupported literal type {type(value).__name__}")


def finite_json(value: Any) -> bool:
    """No NaN or infinity anywhere in a decoded JSON value (they have no JSON text)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite_json(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_json(v) for v in value)
    return True


def coerce_value(raw: str, schema: dict | None, fallback: Fallback = "string") -> Any:
    """Type a raw text argument value by its schema.

    Tries, in order, the types the schema admits: null, boolean, integer, number,
    object/array; a value that fits none stays the raw string (whitespace untouched).

    Args:
        raw: The value exactly as the model wrote it.
        schema: The argument's schema, or None when unknown.
        fallback: Policy for values without a usable schema.

    Returns:
        The typed value.
    """
    types = schema_types(schema) if schema else set()
    if not types:
        if fallback == "json":
            try:
                return lenient_literal(raw)
            except ValueError:
                unescaped = _unescaped_container(raw)
                return raw if unescaped is _NO_VALUE else unescaped
        return raw
    text = raw.strip()
    if "null" in types and text in ("null", "None"):
        return None
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "integer" in types and _INT_RE.match(text):
        return int(text)
    if "number" in types and (_INT_RE.match(text) or _FLOAT_RE.match(text)):
        value = float(text) if not _INT_RE.match(text) else int(text)
        if not isinstance(value, float) or math.isfinite(value):
            return value
    if types & {"object", "array"} or not types & {"string"}:
        try:
            value = lenient_literal(text)
        except ValueError:
            value = _unescaped_container(text) if types & {"object", "array"} else _NO_VALUE
        if value is not _NO_VALUE and (_json_type(value) in types or "string" not in types):
            return value
    return raw


_NO_VALUE = object()


def _unescaped_container(text: str) -> Any:
    """An object or array written as the inside of a JSON string (``[{\\"id\\": 1}]``).

    Models sometimes escape a JSON value once more, as if it sat inside a string; SGLang's
    GLM detectors undo one level of escaping when the text does not parse as it is.

    Returns:
        The decoded object or array, or ``_NO_VALUE`` when the text is not one.
    """
    stripped = text.strip()
    if not stripped.startswith(("{", "[")) or "\\" not in stripped:
        return _NO_VALUE
    try:
        inner = json.loads(f'"{stripped}"')
        value = lenient_literal(inner)
    except ValueError:
        return _NO_VALUE
    return value if isinstance(value, (dict, list)) else _NO_VALUE
