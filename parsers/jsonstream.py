"""Incremental JSON reader that re-emits the value compactly while it streams in.

Lets JSON-argument formats stream argument deltas that are a stable prefix of the final
``dump_arguments`` text: plain string runs pass straight through, escapes are decoded and
re-encoded the way ``json.dumps(ensure_ascii=False)`` writes them, and numbers are held
until complete (so ``108.`` never goes out as ``108.0``).  Duplicate object keys keep the
first occurrence, so the emitted text always equals the serialisation of the built value.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["JsonReader", "JsonSyntaxError"]


class JsonSyntaxError(ValueError):
    """The text cannot be (the start of) a JSON value."""


_STR_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_WS = frozenset(" \t\r\n")
_NUM_CHARS = frozenset("0123456789+-.eE")
_NUM_RE = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
_SIMPLE_ESC = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# Python spellings are accepted because fine-tunes write them; they re-emit as JSON.
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_REPLACEMENT = "\ufffd"

_VALUE, _AFTER, _KEY, _COLON, _STRING, _NUMBER, _LITERAL = range(7)


class _Frame:
    __slots__ = ("box", "first", "is_obj", "key", "keys", "muted")

    def __init__(self, is_obj: bool):
        self.is_obj = is_obj
        self.box: Any = {} if is_obj else []
        self.key = ""
        self.keys: set[str] = set()
        self.first = True
        self.muted = False


def _encode(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class JsonReader:
    """Reads exactly one JSON value from successive chunks.

    ``feed`` returns how many characters of the chunk belong to the value; once ``done``
    is set, ``value`` holds the parsed value.  ``take()`` returns the compact JSON text
    produced since the previous call.  Leading whitespace is skipped.
    """

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self._out: list[str] = []
        self._stack: list[_Frame] = []
        self._mode = _VALUE
        self._mute = 0
        self._parts: list[str] = []
        self._is_key = False
        self._esc: str | None = None
        self._high: int | None = None
        self._scalar = ""

    @property
    def started(self) -> bool:
        """True once the first character of the value has been read."""
        return bool(self._stack) or self._mode != _VALUE or self.done

    def take(self) -> str:
        """Return the compact text emitted since the last call."""
        out = "".join(self._out)
        self._out.clear()
        return out

    def feed(self, text: str) -> int:
        """Consume characters until the value is complete.

        Args:
            text: The next chunk.

        Returns:
            The number of characters consumed (``len(text)`` unless the value ended).

        Raises:
            JsonSyntaxError: The text is not valid JSON.
        """
        i, n = 0, len(text)
        while i < n and not self.done:
            mode = self._mode
            if mode == _STRING:
                i = self._string(text, i)
                continue
            if mode in (_NUMBER, _LITERAL):
                i = self._scalar_step(text, i)
                continue
            c = text[i]
            i += 1
            if c in _WS:
                continue
            if mode == _VALUE:
                self._start_value(c)
            elif mode == _KEY:
                self._key_char(c)
            elif mode == _COLON:
                if c != ":":
                    raise JsonSyntaxError("expected ':'")
                self._mode = _VALUE
            else:
                self._after_char(c)
        return i

    def _scalar_step(self, text: str, i: int) -> int:
        """Extend a number or literal by the run of its characters at ``i``, or end it."""
        chars = _NUM_CHARS if self._mode == _NUMBER else None
        j = i
        while j < len(text) and (text[j] in chars if chars else text[j].isalpha()):
            j += 1
        if j == i:
            self._end_scalar()  # the character at i belongs to what follows
            return i
        self._scalar += text[i:j]
        if chars is None and not any(lit.startswith(self._scalar) for lit in _LITERALS):
            raise JsonSyntaxError(f"bad literal {self._scalar!r}")
        return j

    def finish(self) -> bool:
        """Signal end of input: completes a bare top-level number or literal.

        Returns:
            True if a complete value was read.
        """
        if not self.done and not self._stack and self._mode in (_NUMBER, _LITERAL):
            self._end_scalar()
        return self.done

    # -- structure -------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        if not self._mute:
            self._out.append(text)

    def _start_value(self, c: str) -> None:
        top = self._stack[-1] if self._stack else None
        if c == "]" and top is not None and not top.is_obj:
            self._close()  # empty array, or a tolerated trailing comma
            return
        if top is not None and not top.is_obj:
            if not top.first:
                self._emit(",")
            top.first = False
        if c == "{":
            self._emit("{")
            self._stack.append(_Frame(True))
            self._mode = _KEY
        elif c == "[":
            self._emit("[")
            self._stack.append(_Frame(False))
        elif c == '"':
            self._begin_string(is_key=False)
        elif c == "-" or c.isdigit():
            self._scalar, self._mode = c, _NUMBER
        elif c in "tfnTFN":
            self._scalar, self._mode = c, _LITERAL
        else:
            raise JsonSyntaxError(f"unexpected {c!r}")

    def _key_char(self, c: str) -> None:
        if c == '"':
            self._begin_string(is_key=True)
        elif c == "}":
            self._close()
        else:
            raise JsonSyntaxError(f"expected a key, got {c!r}")

    def _after_char(self, c: str) -> None:
        top = self._stack[-1]
        if c == ",":
            self._mode = _KEY if top.is_obj else _VALUE
        elif c == ("}" if top.is_obj else "]"):
            self._close()
        else:
            raise JsonSyntaxError(f"unexpected {c!r} after a value")

    def _close(self) -> None:
        frame = self._stack.pop()
        self._emit("}" if frame.is_obj else "]")
        self._complete(frame.box)

    def _complete(self, value: Any) -> None:
        if not self._stack:
            self.done, self.value = True, value
            return
        top = self._stack[-1]
        if top.is_obj:
            if top.muted:
                top.muted = False
                self._mute -= 1
            else:
                top.box[top.key] = value
        else:
            top.box.append(value)
        self._mode = _AFTER

    def _key_done(self, key: str) -> None:
        top = self._stack[-1]
        top.key = key
        if key in top.keys:
            top.muted = True  # first occurrence wins; the repeat is read but not kept
            self._mute += 1
        else:
            top.keys.add(key)
            self._emit(("" if top.first else ",") + json.dumps(key, ensure_ascii=False) + ":")
            top.first = False
        self._mode = _COLON

    # -- scalars ---------------------------------------------------------------------

    def _end_scalar(self) -> None:
        text = self._scalar
        if self._mode == _LITERAL:
            if text not in _LITERALS:
                raise JsonSyntaxError(f"bad literal {text!r}")
            value = _LITERALS[text]
            self._emit(json.dumps(value))
        else:
            if not _NUM_RE.match(text):
                raise JsonSyntaxError(f"bad number {text!r}")
            try:
                value = float(text) if any(ch in text for ch in ".eE") else int(text)
            except ValueError as exc:  # e.g. more digits than int() accepts
                raise JsonSyntaxError(str(exc)) from None
            if isinstance(value, float) and not math.isfinite(value):
                raise JsonSyntaxError(f"non-finite number {text!r}")
            self._emit(json.dumps(value))
        self._scalar = ""
        self._complete(value)

    def _begin_string(self, *, is_key: bool) -> None:
        self._mode, self._is_key, self._parts = _STRING, is_key, []
        if not is_key:
            self._emit('"')

    def _string(self, text: str, i: int) -> int:
        n = len(text)
        while i < n:
            if self._esc is not None:
                i = self._escape(text, i)
                continue
            c = text[i]
            if c == '"':
                self._end_string()
                return i + 1
            if c == "\\":
                self._esc = ""
                i += 1
                continue
            m = _STR_RUN.match(text, i)
            if m:
                self._put(m.group(), plain=True)
                i = m.end()
            else:  # a raw control character: invalid JSON, but models write raw newlines
                self._put(c, plain=False)
                i += 1
        return i

    def _escape(self, text: str, i: int) -> int:
        need = 5 if self._esc[:1] == "u" else 1
        take = text[i : i + need - len(self._esc)] if self._esc else text[i]
        self._esc += take
        i += len(take)
        if self._esc[0] == "u" and len(self._esc) < 5:
            return i
        esc, self._esc = self._esc, None
        if esc[0] in _SIMPLE_ESC:
            self._put(_SIMPLE_ESC[esc[0]], plain=False)
        elif esc[0] == "u":
            try:
                code = int(esc[1:], 16)
            except ValueError:
                raise JsonSyntaxError(f"bad escape \\{esc}") from None
            self._codepoint(code)
        else:
            raise JsonSyntaxError(f"bad escape \\{esc}")
        return i

    def _codepoint(self, code: int) -> None:
        if 0xD800 <= code <= 0xDBFF:
            self._flush_high()
            self._high = code
        elif 0xDC00 <= code <= 0xDFFF:
            if self._high is None:
                self._put(_REPLACEMENT, plain=False)
            else:
                high, self._high = self._high, None
                self._put(chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)), plain=False)
        else:
            self._put(chr(code), plain=False)

    def _flush_high(self) -> None:
        # A lone surrogate cannot be encoded as UTF-8 later, so it becomes U+FFFD.
        if self._high is not None:
            self._high = None
            self._put(_REPLACEMENT, plain=False)

    def _put(self, chunk: str, *, plain: bool) -> None:
        if self._high is not None:
            self._flush_high()
        self._parts.append(chunk)
        if not self._is_key:
            self._emit(chunk if plain else _encode(chunk))

    def _end_string(self) -> None:
        self._flush_high()
        value = "".join(self._parts)
        self._parts = []
        if self._is_key:
            self._key_done(value)
        else:
            self._emit('"')
            self._complete(value)
