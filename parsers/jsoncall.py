"""JSON call objects: ``{"name": ..., "arguments": {...}}``, alone, in arrays or sequences.

``CallListReader`` reads them incrementally (Hermes, Llama 3, Mistral v3, Granite, xLAM,
Jamba, InternLM...) and streams the arguments object as the ``JsonReader`` re-emits it,
so deltas are always a prefix of the final arguments JSON.  When the name comes after
the arguments, or the id must be known first (Mistral v3), or ``arguments`` is a JSON
string (decoded once), the call is sent whole when its object closes.  The helpers
build calls from already-parsed values for the whole-body fallbacks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import NotACallError, RawCall
from .jsonstream import JsonReader, JsonSyntaxError
from .schema import lenient_literal

if TYPE_CHECKING:
    from .sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["CallKeys", "CallListReader", "call_from_object", "calls_from_value", "decode_arguments", "json_body_calls"]

_WS = " \t\r\n"


@dataclass(frozen=True)
class CallKeys:
    """Where a call object keeps its parts."""

    name: tuple[str, ...] = ("name",)
    args: tuple[str, ...] = ("arguments", "parameters")
    ids: tuple[str, ...] = ("id",)
    require_args: bool = False
    """Llama 3 style: without an arguments key the object is prose JSON, not a call."""
    name_is_key: bool = False
    """Apertus style ``{"get_weather": {...}}``."""
    wait_for_id: bool = False
    """Do not stream before the id is known (Mistral v3 writes the id after the arguments)."""


def decode_arguments(value: Any) -> dict | None:
    """Normalise an arguments value: dict as is, a JSON string decoded once, empty -> {}."""
    if value is None or value == "" or value == []:
        return {}
    if isinstance(value, str):
        try:
            value = lenient_literal(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def call_from_object(obj: Any, keys: CallKeys) -> RawCall | None:
    """Build a call from a parsed object, or None if it is not shaped like one."""
    if not isinstance(obj, dict):
        return None
    if keys.name_is_key:
        if len(obj) != 1:
            return None
        ((name, args),) = obj.items()
    else:
        name = next((obj[k] for k in keys.name if k in obj), None)
        present = [k for k in keys.args if k in obj]
        if keys.require_args and not present:
            return None
        args = obj[present[0]] if present else None
    call_id = next((obj[k] for k in keys.ids if isinstance(obj.get(k), str)), None)
    arguments = decode_arguments(args)
    if not isinstance(name, str) or not name.strip() or arguments is None:
        return None
    return RawCall(name.strip(), arguments, call_id)


_DEFAULT_KEYS = CallKeys()


def calls_from_value(value: Any, keys: CallKeys = _DEFAULT_KEYS) -> list[RawCall] | None:
    """Calls from a parsed JSON value: one call object or a list of them."""
    items = value if isinstance(value, list) else [value]
    calls = [call_from_object(item, keys) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return calls  # type: ignore[return-value]


class CallListReader:
    """Payload reader for call objects: one, an array, or a separator-joined sequence."""

    def __init__(self, sink: EventSink, keys: CallKeys = _DEFAULT_KEYS, *, array: bool = True,
                 single: bool = True, sequence: str = "", close_at_eof: bool = False) -> None:
        """Configure the accepted shapes.

        Args:
            sink: Where calls go.
            keys: Key names of the call objects.
            array: Accept ``[{...}, {...}]``.
            single: Accept a bare ``{...}``.
            sequence: Separators allowed between consecutive bare objects (``"\\n;"``).
            close_at_eof: At the end of output, close a call object and list left open
                after complete values (Apertus, as vLLM: ``[{"f": {"a": 1}}`` is a call).
        """
        self._sink, self._keys = sink, keys
        self._array, self._single, self._sequence = array, single, sequence
        self._close_at_eof = close_at_eof
        self._state = "start"
        self._in_array = False
        self._pos = 0
        self.committed = 0
        self.done = False
        self._calls = 0
        self._reader: JsonReader | None = None
        self._forward = False
        self._reset_object()

    @property
    def started(self) -> bool:
        """True once a call was emitted or opened (the text can no longer be re-read)."""
        return bool(self.committed) or self._call_open

    def _reset_object(self) -> None:
        self._name: str | None = None
        self._id: str | None = None
        self._args: Any = None
        self._has_args = False
        self._members = 0
        self._key: str | None = None
        self._call_open = False

    def feed(self, text: str) -> int | None:
        """Consume text; return the characters used once the payload ended, else None."""
        i = 0
        try:
            while i < len(text) and not self.done:
                if self._reader is not None:
                    used = self._reader.feed(text[i:])
                    i += used
                    self._pos += used
                    if self._forward:
                        self._sink.args(self._reader.take())
                    if self._reader.done:
                        self._value_done()
                    continue
                c = text[i]
                if c in _WS:
                    pass
                elif self._state == "between" and c != "{" and c not in self._sequence:
                    self.done = True
                    break
                else:
                    self._structure(c)
                i += 1
                self._pos += 1
        except JsonSyntaxError as exc:
            raise NotACallError(str(exc)) from None
        return i if self.done else None

    def finish(self) -> bool:
        """End of input: True if no call is left half-read."""
        if self.done or self._state == "between":
            return True
        return self._close_at_eof and self._close_open_list()

    def _close_open_list(self) -> bool:
        # Only brackets may be missing: a value cut off inside stays a truncated call.
        if self._reader is not None or self._state not in ("key", "element"):
            return False
        if self._state == "key":
            self._object_done()
        return self._calls > 0

    def _structure(self, c: str) -> None:
        state = self._state
        if state == "start":
            if c == "[" and self._array:
                self._in_array, self._state = True, "element"
            elif c == "{" and self._single:
                self._open_object()
            else:
                raise NotACallError(f"a call list cannot start with {c!r}")
        elif state in ("element", "between"):
            if c == "{":
                self._open_object()
            elif state == "element" and c == "]":
                if not self._calls:
                    raise NotACallError("a list without a single call")
                self.done = True
            elif c not in (",;" if state == "element" else self._sequence):
                raise NotACallError(f"unexpected {c!r} between calls")
        elif state == "key":
            if c == '"':
                self._reader = JsonReader()
                self._reader.feed('"')
            elif c == "}":
                self._object_done()
            elif c != ",":
                raise NotACallError(f"unexpected {c!r} in a call object")
        elif state == "colon":
            if c != ":":
                raise NotACallError("expected ':'")
            self._state = "value"
        else:
            self._begin_value(c)

    def _open_object(self) -> None:
        self._reset_object()
        self._state = "key"

    def _begin_value(self, c: str) -> None:
        keys, key = self._keys, self._key
        first_member = keys.name_is_key and self._members == 1
        if first_member:
            self._name = key
        is_args = first_member or (not keys.name_is_key and key in keys.args and not self._has_args)
        ready = self._name is not None and (self._id is not None or not keys.wait_for_id)
        self._forward = is_args and c == "{" and ready and not self._call_open
        if self._forward:
            self._sink.start(self._name, self._id)
            self._call_open = True
        self._reader = JsonReader()
        self._reader.feed(c)
        if self._forward:
            self._sink.args(self._reader.take())

    def _value_done(self) -> None:
        reader, self._reader = self._reader, None
        self._forward = False
        value = reader.value
        if self._state == "key":
            self._key = value
            self._members += 1
            self._state = "colon"
            return
        keys, key = self._keys, self._key
        if keys.name_is_key:
            if self._members == 1:
                self._args, self._has_args = value, True
        elif key in keys.name and isinstance(value, str) and self._name is None:
            self._name = value.strip()
        elif key in keys.ids and isinstance(value, str) and self._id is None:
            self._id = value
        elif key in keys.args and not self._has_args:
            self._args, self._has_args = value, True
        self._state = "key"

    def _object_done(self) -> None:
        if self._call_open:
            if isinstance(self._args, dict) and (not self._keys.name_is_key or self._members == 1):
                self._sink.end(self._args)
                self._calls += 1
            elif not self.committed and not self._in_array:
                raise NotACallError("object is not a call")
            self._commit()
            return
        keys = self._keys
        obj: dict[str, Any] = {}
        if keys.name_is_key:
            if self._name is not None and self._members == 1:
                obj[self._name] = self._args
        else:
            if self._name is not None:
                obj[keys.name[0]] = self._name
            if self._has_args:
                obj[keys.args[0]] = self._args
            if self._id is not None:
                obj[keys.ids[0]] = self._id
        call = call_from_object(obj, keys)
        if call is not None:
            self._sink.call(call)
            self._calls += 1
        elif not self.committed and not self._in_array:
            raise NotACallError("object is not a call")
        else:
            logger.debug("skipping a malformed call inside a call list")
        self._commit()

    def _commit(self) -> None:
        if self._calls:
            self.committed = self._pos + 1  # the closing brace is being consumed
        self._call_open = False
        if self._in_array:
            self._state = "element"
        elif self._sequence:
            self._state = "between"
        else:
            self.done = True


def json_body_calls(body: str, keys: CallKeys = _DEFAULT_KEYS) -> list[RawCall] | None:
    """Lenient whole-body parse (JSON, or a Python literal) into calls, or None."""
    try:
        value = lenient_literal(body.strip())
    except ValueError:
        return None
    return calls_from_value(value, keys)
