"""Lenient parser for Python-call-syntax tool calls: ``[f(a=1), g(b='x')]``.

``ast.parse`` rejects what small models really write (LFM2, Llama 3.2/4, Olmo 3): raw
newlines inside strings, unescaped nested quotes (``command='sed -n '360,450p' f.py'``),
``07``, NUL bytes.  Here a quote only closes a string when the next non-space character
can follow a value (``,)]}:`` or the end); a string one of whose quotes could not close it
may close at a later such quote when the first reading leaves the call broken (a quoted
``python3 -c`` payload).  Literals may be Python or JSON spelled, and one bad call is
skipped without losing its siblings.  Non-finite numbers are rejected.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["NeedMore", "PyCall", "PyLitError", "parse_calls"]


class PyLitError(ValueError):
    """The text is not a call list."""


class NeedMore(Exception):
    """The text ends before the call list does."""


PyCall = tuple[str, dict[str, Any]]

_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_KW = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_CONSTANTS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"', "b": "\b", "f": "\f",
            "a": "\a", "v": "\v"}
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}
_CLOSERS = ",)]}:"
_STRING_STOPS = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}  # where a string may end or escape


class _Parser:
    def __init__(self, text: str, final: bool) -> None:
        self.t, self.n, self.final = text, len(text), final
        self.skips: dict[int, int] = {}  # string start -> closing candidates to pass over
        self.broken: list[int] = []  # strings of the current call that closed at a candidate

    def need(self, i: int) -> None:
        if i >= self.n:
            if self.final:
                raise PyLitError("unexpected end")
            raise NeedMore

    def ws(self, i: int) -> int:
        while i < self.n and self.t[i] in " \t\r\n":
            i += 1
        return i

    def call(self, i: int) -> tuple[PyCall, int]:
        m = _NAME.match(self.t, i)
        if not m:
            self.need(i)
            raise PyLitError("expected a function name")
        name, i = m.group(), self.ws(m.end())
        self.need(i)
        if self.t[i] != "(":
            raise PyLitError("expected '('")
        kwargs: dict[str, Any] = {}
        i = self.ws(i + 1)
        while True:
            self.need(i)
            if self.t[i] == ")":
                return (name.strip("."), kwargs), i + 1
            m = _KW.match(self.t, i)
            if not m:
                raise PyLitError("expected a keyword argument")
            j = self.ws(m.end())
            self.need(j)
            if self.t[j] != "=":
                raise PyLitError("positional arguments are not supported")
            value, i = self.value(self.ws(j + 1))
            kwargs.setdefault(m.group(), value)
            i = self.ws(i)
            self.need(i)
            if self.t[i] == ",":
                i = self.ws(i + 1)
            elif self.t[i] != ")":
                raise PyLitError("expected ',' or ')'")

    def value(self, i: int) -> tuple[Any, int]:
        self.need(i)
        c = self.t[i]
        if c in "'\"":
            return self.string(i)
        if c in "[(":
            return self.sequence(i, "]" if c == "[" else ")")
        if c == "{":
            return self.mapping(i)
        m = _NUMBER.match(self.t, i)
        if m:
            return self.number(m)
        m = _KW.match(self.t, i)
        if m and m.group() in _CONSTANTS:
            if m.end() >= self.n and not self.final:
                raise NeedMore
            return _CONSTANTS[m.group()], m.end()
        if m and m.end() >= self.n and not self.final:
            raise NeedMore
        raise PyLitError(f"unsupported value at {self.t[i:i + 20]!r}")

    def number(self, m: re.Match[str]) -> tuple[Any, int]:
        if m.end() >= self.n and not self.final:
            raise NeedMore
        text = m.group()
        if text.lower().lstrip("+-").startswith("0x"):
            return int(text, 16), m.end()
        if any(ch in text for ch in ".eE"):
            value = float(text)
            if not math.isfinite(value):
                raise PyLitError("non-finite number")
            return value, m.end()
        return int(text), m.end()

    def string(self, i: int) -> tuple[str, int]:
        q = self.t[i]
        triple = self.t.startswith(q * 3, i)
        j = i + (3 if triple else 1)
        parts: list[str] = []
        stops = _STRING_STOPS[q]
        # A string is broken once one of its quotes could not close it (``'sed -n '1,9p' f'``);
        # it then closes at a later candidate when the call fails to parse (``_read_call``).
        broken, skip = False, self.skips.get(i, 0)
        while True:
            m = stops.search(self.t, j)
            if m is None:
                parts.append(self.t[j:])
                self.need(self.n)  # the text ends inside the string
            if m.start() > j:
                parts.append(self.t[j : m.start()])
            j = m.start()
            if self.t[j] == "\\":
                j = self._escape(j, parts)
                continue
            if triple:
                if self.t.startswith(q * 3, j):
                    return "".join(parts), j + 3
            elif self._closes(j + 1):
                if not (broken and skip):
                    if broken:
                        self.broken.append(i)
                    return "".join(parts), j + 1
                skip -= 1
            else:
                broken = True
            parts.append(q)
            j += 1

    def _escape(self, j: int, parts: list[str]) -> int:
        """Decode the backslash escape at ``j`` into ``parts``; return the index after it."""
        self.need(j + 1)
        esc = self.t[j + 1]
        if esc in _HEX_WIDTH:
            width = _HEX_WIDTH[esc]
            self.need(j + 1 + width)
            try:
                parts.append(chr(int(self.t[j + 2 : j + 2 + width], 16)))
                return j + 2 + width
            except ValueError:
                pass
        parts.append(_ESCAPES.get(esc, "\\" + esc))
        return j + 2

    def _closes(self, k: int) -> bool:
        """A quote closes the string only if a value may end there."""
        k = self.ws(k)
        if k >= self.n:
            if self.final:
                return True
            raise NeedMore
        return self.t[k] in _CLOSERS

    def sequence(self, i: int, close: str) -> tuple[list[Any], int]:
        items: list[Any] = []
        i = self.ws(i + 1)
        while True:
            self.need(i)
            if self.t[i] == close:
                return items, i + 1
            value, i = self.value(i)
            items.append(value)
            i = self.ws(i)
            self.need(i)
            if self.t[i] == ",":
                i = self.ws(i + 1)
            elif self.t[i] != close:
                raise PyLitError(f"expected ',' or {close!r}")

    def mapping(self, i: int) -> tuple[Any, int]:
        out: dict[str, Any] = {}
        items: list[Any] = []
        is_set: bool | None = None
        i = self.ws(i + 1)
        while True:
            self.need(i)
            if self.t[i] == "}":
                return (items if is_set else out), i + 1
            key, i = self.value(i)
            i = self.ws(i)
            self.need(i)
            if self.t[i] == ":" and is_set is not True:
                is_set = False
                value, i = self.value(self.ws(i + 1))
                out.setdefault(key if isinstance(key, str) else str(key), value)
                i = self.ws(i)
            elif is_set is not False:
                is_set = True
                items.append(key)
            else:
                raise PyLitError("mixed set and dict")
            self.need(i)
            if self.t[i] == ",":
                i = self.ws(i + 1)
            elif self.t[i] != "}":
                raise PyLitError("expected ',' or '}'")

    def skip_element(self, i: int, closers: str) -> int:
        """After a bad call: skip to the next top-level separator (bracket-aware)."""
        depth, quote = 0, ""
        while i < self.n:
            ch = self.t[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif ch == quote and self._quote_ends(i + 1):
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch in "([{":
                depth += 1
            elif ch in ")]}" and depth:
                depth -= 1
            elif depth == 0 and ch in closers:
                return i
            i += 1
        self.need(i)
        return i

    def ends_element(self, i: int) -> bool:
        """A list element may end here (``,``, ``;`` or ``]`` next)."""
        i = self.ws(i)
        self.need(i)
        return self.t[i] in ",;]"

    def _quote_ends(self, k: int) -> bool:
        k = self.ws(k)
        return k >= self.n or self.t[k] in _CLOSERS


_MAX_REQUOTES = 8


def _read_call(p: _Parser, start: int, bracketed: bool) -> tuple[PyCall, int]:
    """One call; a broken string closes at a later quote when the first reading fails.

    A reading fails when the call does not parse or, in a list, is not followed by ``,``
    or ``]`` (``command='python3 -c "f(x='\\,')"'`` first closes inside the payload).  As
    vLLM's nested-quote recovery, the later closing quote that makes the call whole wins;
    without one, the first reading stands.
    """
    p.skips, first = {}, None
    for _ in range(_MAX_REQUOTES):
        p.broken = []
        try:
            found = p.call(start)
        except PyLitError:
            found = None
        if found is not None:
            if not bracketed or p.ends_element(found[1]):
                return found
            first = first or found
        if not p.broken:
            break
        p.skips[p.broken[-1]] = p.skips.get(p.broken[-1], 0) + 1
    if first is None:
        raise PyLitError("not a call")
    return first


def parse_calls(text: str, *, bracketed: bool = True, final: bool = False) -> tuple[list[PyCall | None], int]:
    """Parse ``[f(a=1), g()]`` (or, unbracketed, ``f(a=1)\\ng()``) from the start of ``text``.

    Args:
        text: Text starting at ``[`` (or at the first call when unbracketed).
        bracketed: The list is wrapped in ``[...]``; unbracketed calls run to the end.
        final: No more text will come (an open string at the end then closes).

    Returns:
        The calls (None for each call that could not be parsed) and the index after the
        closing ``]`` (or the end of the text).

    Raises:
        NeedMore: The text ends inside the list (only when not ``final``).
        PyLitError: The text does not start a call list.
    """
    p = _Parser(text, final or not bracketed)
    i = p.ws(0)
    if bracketed:
        p.need(i)
        if text[i] != "[":
            raise PyLitError("expected '['")
        i = p.ws(i + 1)
    calls: list[PyCall | None] = []
    closers = "]," if bracketed else ",\n;"
    while True:
        if not bracketed and i >= p.n:
            return calls, i
        p.need(i)
        if bracketed and text[i] == "]":
            if not calls:
                raise PyLitError("empty call list")
            return calls, i + 1
        start = i
        try:
            call, i = _read_call(p, i, bracketed)
            calls.append(call)
        except PyLitError:
            if not calls and _NAME.match(text, start) is None:
                raise
            calls.append(None)
            i = p.skip_element(start, closers)
        i = p.ws(i)
        while i < p.n and text[i] in ",;":
            i = p.ws(i + 1)
