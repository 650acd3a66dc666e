"""Typed reads of the open-ended, plain-dict parts of request bodies.

Inbound bodies keep messages, content parts, blocks, items and tools as dicts so that
unknown fields and unknown part/block/item/tool types can be skipped (agents send things
no spec lists). This module owns the other half of that leniency: a field we *do* read,
holding a value of the wrong JSON type, is a 400 ``invalid_request_error`` whose ``param``
is the JSON path of that value, never a ``TypeError`` deep in a translation, a chat
template or ``json.dumps``. Null counts as absent, as it does everywhere else in a body.

Paths are spelt the way each API spells them: OpenAI's ``messages[0].tool_calls[1]`` and
Anthropic's ``messages.0.content.1.text``; the error text follows the same dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router.errors import InvalidRequestError

# JSON type names as clients know them, for the error text.
_NAMES: dict[type, str] = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "an array", dict: "an object"}
# Anthropic's errors use pydantic's words ("Input should be a valid string").
_ANTHROPIC_NAMES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list", dict: "dictionary"}


@dataclass(frozen=True)
class JsonPath:
    """Where a value sits in the request body; ``path / "content" / 1`` goes one level down."""

    text: str
    dotted: bool = False  # Anthropic's spelling: messages.0.content; OpenAI's: messages[0].content

    def __truediv__(self, key: str | int) -> JsonPath:
        if self.dotted or isinstance(key, str):
            return JsonPath(f"{self.text}.{key}" if self.text else str(key), self.dotted)
        return JsonPath(f"{self.text}[{key}]", self.dotted)

    def __str__(self) -> str:
        return self.text


def openai_path(root: str) -> JsonPath:
    """A path in an OpenAI body (chat, completions, Responses)."""
    return JsonPath(root)


def anthropic_path(root: str) -> JsonPath:
    """A path in an Anthropic Messages body."""
    return JsonPath(root, dotted=True)


def is_kind(value: Any, kind: type) -> bool:
    """Whether ``value`` has JSON type ``kind``: booleans are not numbers, integers are numbers."""
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def wrong_type(value: Any, at: JsonPath, *kinds: type) -> InvalidRequestError:
    """The 400 for ``value`` at ``at`` not being one of ``kinds``."""
    if at.dotted:
        wanted = " or ".join(_ANTHROPIC_NAMES[k] for k in kinds)
        return InvalidRequestError(f"{at}: Input should be a valid {wanted}", param=at.text)
    wanted = " or ".join(_NAMES[k] for k in kinds)
    got = "null" if value is None else next(name for k, name in _NAMES.items() if is_kind(value, k))
    prefix = "one of " if len(kinds) > 1 else ""
    return InvalidRequestError(f"Invalid type for '{at}': expected {prefix}{wanted}, but got {got} instead.", param=at.text)


def missing(at: JsonPath) -> InvalidRequestError:
    """The 400 for a required field that is absent (or null)."""
    if at.dotted:
        return InvalidRequestError(f"{at}: Field required", param=at.text)
    return InvalidRequestError(f"Missing required parameter: '{at}'.", param=at.text)


def expect(value: Any, at: JsonPath, *kinds: type) -> Any:
    """``value`` itself, if its JSON type is one of ``kinds``; else a 400 naming ``at``."""
    if any(is_kind(value, kind) for kind in kinds):
        return value
    raise wrong_type(value, at, *kinds)


def optional(container: dict[str, Any], key: str, at: JsonPath, *kinds: type) -> Any:
    """``container[key]`` if it is one of ``kinds``, None when absent or null; else a 400."""
    value = container.get(key)
    return None if value is None else expect(value, at / key, *kinds)


def required(container: dict[str, Any], key: str, at: JsonPath, *kinds: type) -> Any:
    """``container[key]``, which must be present, non-null and one of ``kinds``."""
    if container.get(key) is None:
        raise missing(at / key)
    return expect(container[key], at / key, *kinds)


def as_object(value: Any, at: JsonPath) -> dict[str, Any]:
    """``value`` as a JSON object (a message, a part, a block, an item, a tool)."""
    return expect(value, at, dict)


def opt_str(container: dict[str, Any], key: str, at: JsonPath) -> str | None:
    return optional(container, key, at, str)


def req_str(container: dict[str, Any], key: str, at: JsonPath) -> str:
    return required(container, key, at, str)


def opt_bool(container: dict[str, Any], key: str, at: JsonPath) -> bool | None:
    return optional(container, key, at, bool)


def opt_int(container: dict[str, Any], key: str, at: JsonPath) -> int | None:
    return optional(container, key, at, int)


def opt_list(container: dict[str, Any], key: str, at: JsonPath) -> list[Any] | None:
    return optional(container, key, at, list)


def opt_object(container: dict[str, Any], key: str, at: JsonPath) -> dict[str, Any] | None:
    return optional(container, key, at, dict)


def req_object(container: dict[str, Any], key: str, at: JsonPath) -> dict[str, Any]:
    return required(container, key, at, dict)


def kind_of(container: dict[str, Any], at: JsonPath) -> str | None:
    """The ``type`` discriminator of a part, block, item or tool: a string, or None if absent.

    An unknown string is the caller's to skip; a non-string is a 400 (it is not a type at all).
    """
    return opt_str(container, "type", at)
