"""Decoding request bodies into Structs with errors that name the offending field."""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from router.errors import InvalidRequestError

T = TypeVar("T")

_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")


def decode_body(body: bytes, body_type: type[T]) -> T:
    """Decode JSON leniently (``"5"`` → 5, unknown fields ignored) or raise a 400 naming ``param``."""
    if not body.strip():
        raise InvalidRequestError("The request body is empty; expected a JSON object.")
    try:
        return msgspec.json.decode(body, type=body_type, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _PATH.search(message)
        param = match.group("path") if match else None
        text = _PATH.sub("", message)
        raise InvalidRequestError(f"Invalid request: {text}" + (f" at '{param}'" if param else ""), param=param or None) from None
    except msgspec.DecodeError as exc:
        raise InvalidRequestError(f"We could not parse the JSON body of your request: {exc}") from None
