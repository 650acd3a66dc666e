"""`ConfigError` and the translation of pydantic errors into one plain line per problem.

Each line is `<toml.path>: <what is wrong and what is allowed>`. The allowed values come from the schema
(bounds, `Rule` metadata), so messages never drift from the fields. Loading itself lives in `load.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
import types
from typing import Annotated, Any, NamedTuple, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel, Tag, ValidationError

from .schema import LOCAL_TAG, UPSTREAM_TAG, Rule

# Union member tags pydantic puts into error locations; not part of any TOML path.
_TAGS = frozenset({LOCAL_TAG, UPSTREAM_TAG})

__all__ = ["ConfigError", "dotted_path", "translate_errors"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BOUND_WORDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


class ConfigError(Exception):
    """A config that cannot be used. `errors` holds one line per problem, every line naming its TOML path."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors: list[str] = list(errors)
        super().__init__("\n".join(self.errors))


def dotted_path(loc: Iterable[str | int]) -> str:
    """Render a pydantic `loc` as a TOML path: `models."qwen3.5".aliases[0]`.

    Keys that are not TOML bare keys are quoted, so the path can be pasted back into the file.
    """
    out = ""
    for segment in loc:
        if isinstance(segment, int):
            out += f"[{segment}]"
            continue
        key = segment if _BARE_KEY.fullmatch(segment) else json.dumps(segment, ensure_ascii=False)
        out += f".{key}" if out else key
    return out


class _Target(NamedTuple):
    """What a `loc` points at in the schema: its type, its constraints and the model that owns it."""

    annotation: Any
    metadata: tuple[Any, ...]
    owner: type[BaseModel] | None


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return base, tuple(metadata)
    return annotation, ()


def _locate(root: type[BaseModel], loc: Sequence[str | int]) -> _Target:
    """Walk the schema along `loc`, through models, dict values/keys and list items."""
    annotation: Any = root
    metadata: tuple[Any, ...] = ()
    owner: type[BaseModel] | None = None
    for segment in loc:
        base, _ = _unwrap(annotation)
        origin, args = get_origin(base), get_args(base)
        if origin in (Union, types.UnionType) and segment in _TAGS:
            annotation = next((member for member in args if _tag_of(member) == segment), None)
            if annotation is None:
                return _Target(None, (), owner)
            continue
        if isinstance(base, type) and issubclass(base, BaseModel):
            owner = base
            field = base.model_fields.get(str(segment))
            if field is None:
                return _Target(None, (), owner)
            annotation, metadata = field.annotation, tuple(field.metadata)
        elif origin is dict and args:
            # pydantic reports a bad dict key at `(..., key, "[key]")`; the key segment itself is a value.
            annotation, metadata = (args[0] if segment == "[key]" else args[1]), ()
        elif origin in (tuple, list) and args:
            annotation, metadata = args[0], ()
        else:
            return _Target(None, (), owner)
    base, extra = _unwrap(annotation)
    return _Target(base, metadata + extra, owner)


def _tag_of(member: Any) -> str | None:
    _, metadata = _unwrap(member)
    return next((item.tag for item in metadata if isinstance(item, Tag)), None)


def _number(value: float) -> str:
    # 2 not 2.0, and never 1e+06: bounds read like the TOML an operator would write.
    return str(int(value)) if float(value).is_integer() else str(value)


def _bounds(metadata: tuple[Any, ...]) -> str:
    found = {}
    for item in metadata:
        if isinstance(item, at.BaseMetadata):
            found.update({name: getattr(item, name) for name, _ in _BOUND_WORDS if hasattr(item, name)})
    if "ge" in found and "le" in found:
        return f" from {_number(found['ge'])} to {_number(found['le'])}"
    parts = [f"{word} {_number(found[name])}" for name, word in _BOUND_WORDS if name in found]
    return f" {' and '.join(parts)}" if parts else ""


def _describe(target: _Target) -> str | None:
    """Say what a field accepts ("an integer from 0 to 65535"), or None when the schema does not know."""
    for item in target.metadata:
        if isinstance(item, Rule):
            return item.expected
    base = target.annotation
    if base is bool:
        return "true or false"
    if base is int:
        return f"an integer{_bounds(target.metadata)}"
    if base is float:
        return f"a number{_bounds(target.metadata)}"
    if base is str:
        return "a string"
    if get_origin(base) in (tuple, list):
        return "a list"
    if base is dict or get_origin(base) is dict or (isinstance(base, type) and issubclass(base, BaseModel)):
        return "a table"
    return None


def _render(value: Any) -> str:
    """A TOML-flavoured, bounded rendering of the offending input for `(got ...)`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _message(error: Mapping[str, Any], root: type[BaseModel]) -> tuple[tuple[str | int, ...], str]:
    loc = tuple(error["loc"])
    target = _locate(root, loc)
    path = tuple(segment for segment in loc if segment not in _TAGS)
    path = path[:-1] if path and path[-1] == "[key]" else path
    kind = error["type"]
    if kind == "missing":
        return path, "required"
    if kind == "config_rule":  # a schema check that words its own message (KeyConfig's secret)
        return path, error["msg"]
    if kind == "extra_forbidden":
        allowed = ", ".join(target.owner.model_fields) if target.owner else "none"
        return path, f"unknown key; allowed keys: {allowed}"
    expected = _describe(target)
    if expected is None:
        # Generic fallback: pydantic's own sentence, still anchored to the path.
        return path, f"{error['msg']} (got {_render(error.get('input'))})"
    return path, f"must be {expected} (got {_render(error.get('input'))})"


def translate_errors(
    exc: ValidationError,
    root: type[BaseModel],
    *,
    origins: Mapping[str, str] | None = None,
) -> list[str]:
    """Turn a pydantic `ValidationError` into `path: message` lines.

    Args:
        exc: The error raised while validating a `root`-shaped document.
        root: The model whose fields `loc` tuples walk (e.g. `RouterConfig`).
        origins: Dotted path -> environment variable that set it; a line whose path lies under one of
            them says `(from NAME)` so the operator knows the file is not at fault.

    Returns:
        One line per error, in pydantic's order.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc, text = _message(error, root)
        path = dotted_path(loc)
        source = _origin_of(path, origins or {})
        lines.append(f"{path or '<root>'}: {text}" + (f" (from {source})" if source else ""))
    return lines


def _origin_of(path: str, origins: Mapping[str, str]) -> str | None:
    for prefix, name in origins.items():
        if path == prefix or path.startswith((f"{prefix}.", f"{prefix}[")):
            return name
    return None
