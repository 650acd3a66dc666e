"""Decoding request bodies into Structs with errors that name the offending field.

Every way a body can fail to decode is a 400: not JSON, the wrong shape, or nested deeper
than ``MAX_NESTING`` (msgspec itself gives up near Python's recursion limit, and code after
it that walks a body, templates included, should never get near that).
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from router.errors import InvalidRequestError

T = TypeVar("T")

MAX_NESTING = 100

_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")


def decode_body(body: bytes, body_type: type[T]) -> T:
    """Decode JSON leniently (``"5"`` → 5, unknown fields ignored) or raise a 400 naming ``param``."""
    if not body.strip():
        raise InvalidRequestError("The request body is empty; expected a JSON object.")
    try:
        document = msgspec.json.decode(body)
    except RecursionError:
        raise _too_deep() from None
    except msgspec.DecodeError as exc:
        raise InvalidRequestError(f"We could not parse the JSON body of your request: {exc}") from None
    if _nesting_exceeds(document, MAX_NESTING):
        raise _too_deep()
    try:
        return msgspec.convert(document, type=body_type, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _PATH.search(message)
        param = match.group("path") if match else None
        text = _PATH.sub("", message)
        raise InvalidRequestError(f"Invalid request: {text}" + (f" at '{param}'" if param else ""), param=param or None) from None


def _nesting_exceeds(document: object, limit: int) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` (an explicit stack: no recursion)."""
    stack = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return False


def _too_deep() -> InvalidRequestError:
    return InvalidRequestError(f"The JSON body nests arrays and objects deeper than {MAX_NESTING} levels.")
