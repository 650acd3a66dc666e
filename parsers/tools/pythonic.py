"""Python-call-syntax tool calls: ``[get_weather(city='LA'), register(name='Doe', age=9)]``.

Used by Llama 3.2 (pythonic template), Llama 4 (optionally inside ``<|python_start|>``
... ``<|python_end|>``), Gemma 3 with the pythonic template, ToolACE, LFM2 (inside
``<|tool_call_start|>`` ... ``<|tool_call_end|>``, text may follow) and Olmo 3 (one call
per line inside ``<function_calls>`` ... ``</function_calls>``, no brackets).  Values are
Python or JSON literals, parsed leniently (``parsers.pylit``); one unparsable call is
dropped without losing its siblings.  A bare list counts only at call position and only
when it starts like ``[name(``; after prose, a list of offered tools counts when nothing
but end tokens follows it (SGLang's detector takes it anywhere, vLLM's nowhere).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..base import NotACallError, RawCall
from ..block import NEED_MORE, Block, BufferedBlock, SniffBlock
from ..engine import ToolStream
from ..jsonblock import JsonBlock
from ..jsoncall import CallListReader
from ..pylit import NeedMore, PyLitError, parse_calls

if TYPE_CHECKING:
    from ..sink import EventSink

__all__ = [
    "Lfm2ToolParser",
    "Llama4PythonicToolParser",
    "Olmo3ToolParser",
    "PyListReader",
    "PythonicToolParser",
]

_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.\-]*\s*\(")
_LIST_PREFIX = re.compile(r"\[\s*(?:[A-Za-z_][\w.\-]*\s*)?\Z")


def _to_calls(parsed: list, builtin: bool = False) -> list[RawCall]:
    calls = []
    for item in parsed:
        if item is None:
            continue
        name, kwargs = item
        if builtin:
            name = name.removesuffix(".call")
        calls.append(RawCall(name, kwargs))
    return calls


class PyListReader:
    """Payload reader for a call list; re-parses only when a closing ``]``/``)`` arrives."""

    def __init__(self, sink, *, bracketed: bool = True, builtin: bool = False) -> None:
        self._sink, self._bracketed, self._builtin = sink, bracketed, builtin
        self._closer = "]" if bracketed else ")"
        self._parts: list[str] = []
        self._size = 0
        self.committed = 0
        self.started = False

    @property
    def _buf(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def feed(self, text: str) -> int | None:
        before = self._size
        self._parts.append(text)
        self._size += len(text)
        if self._closer not in text:
            return None  # the list can only end at a closer: no need to re-parse
        if not self._bracketed:
            found = self._single_call()
            if found is None:
                return None
            parsed, end = found
        else:
            try:
                parsed, end = parse_calls(self._buf, bracketed=True)
            except NeedMore:
                return None
            except PyLitError as exc:
                raise NotACallError(str(exc)) from None
        self._emit(parsed)
        return end - before

    def _single_call(self) -> tuple[list, int] | None:
        """A built-in call has no list around it: it ends at one of its ``)``."""
        cut = self._buf.find(")")
        while cut >= 0:
            try:
                parsed, _ = parse_calls(self._buf[: cut + 1], bracketed=False, final=True)
            except PyLitError:
                parsed = []
            if len(parsed) == 1 and parsed[0] is not None:
                return parsed, cut + 1
            cut = self._buf.find(")", cut + 1)
        return None

    def finish(self) -> bool:
        if self.started:
            return True
        try:
            parsed, _ = parse_calls(self._buf, bracketed=self._bracketed, final=True)
        except (PyLitError, NeedMore):
            return False
        self._emit(parsed)
        return True

    def _emit(self, parsed: list) -> None:
        calls = _to_calls(parsed, self._builtin)
        if not calls:
            raise NotACallError("no parsable call in the list")
        for call in calls:
            self._sink.call(call)
        self.started = True
        self.committed = len(self._buf)


class _Collect:
    """Sink stand-in that keeps the calls a reader found, to emit them later or never."""

    def __init__(self, calls: list[RawCall]) -> None:
        self._calls = calls

    def call(self, call: RawCall) -> None:
        self._calls.append(call)


class _ClosingList(Block):
    """A call list after prose (its ``[`` was the marker): a call only if it ends the output.

    SGLang's pythonic detector takes a list anywhere; a list followed by more prose is
    quoted (``Call it as [get_time()] later.``), so only a list that nothing but
    whitespace and end tokens follows counts, and only when it calls offered tools.
    """

    def __init__(self, stream: PythonicToolParser) -> None:
        self._sink, self._ends = stream.sink, stream.drop_markers
        self._calls: list[RawCall] = []
        self._reader = PyListReader(_Collect(self._calls))
        self._reader.feed("[")
        self._head = "["
        self._tail: str | None = None

    def feed(self, text: str) -> int | None:
        if self._tail is not None:
            self._tail += text
        else:
            if len(self._head) < 128:
                self._head += text[:128]
                if not (_LIST_START.match(self._head) or _LIST_PREFIX.match(self._head)):
                    raise NotACallError("not a call list")
            used = self._reader.feed(text)
            if used is None:
                return None
            if not all(c.name in self._sink.tools.names for c in self._calls):
                raise NotACallError("a list in prose naming a tool that was not offered")
            self._tail = text[used:]
        self._check_tail()
        return None

    def _check_tail(self) -> None:
        rest = self._tail.lstrip()
        while rest:
            end = next((e for e in self._ends if rest.startswith(e)), None)
            if end is None:
                if any(e.startswith(rest) for e in self._ends):
                    return  # maybe an end token still arriving
                raise NotACallError("prose after the list")
            rest = rest[len(end) :].lstrip()

    def close(self) -> bool:
        if self._tail is None:
            raise NotACallError("a list in prose cut off")
        for call in self._calls:
            self._sink.call(call)
        self.leftover = self._tail
        return True


class PythonicToolParser(ToolStream):
    """A Python list of calls at call position, or ending the output after prose."""

    start_markers = ("<|python_start|>", "[")
    drop_markers = ("<|python_end|>", "<|eot_id|>", "<|eom_id|>", "<|eot|>")

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        if not text.startswith("["):
            return None
        if _LIST_START.match(text):
            return JsonBlock(PyListReader(self.sink))
        if not eof and _LIST_PREFIX.match(text) and len(text) < 128:
            return NEED_MORE
        return None

    def open_block(self, marker: str) -> Block | None:
        if marker == "[":
            return _ClosingList(self) if self.tools.names else None
        return JsonBlock(PyListReader(self.sink), end_markers=("<|python_end|>",))


class Llama4PythonicToolParser(PythonicToolParser):
    """Llama 4: the list may sit inside ``<|python_start|>`` ... ``<|python_end|>``."""


_LFM2_END = "<|tool_call_end|>"


def _echo_plausible(body: str) -> bool:
    return bool(_LIST_START.match(body) or _LIST_PREFIX.match(body))


def _drop_echo(body: str, final: bool) -> list[RawCall] | None:
    """An echo is a whole call list; anything else before the end marker is not one."""
    return [] if not final and _LIST_START.match(body) else None


class _Lfm2Echo(BufferedBlock):
    """A call list repeated after the call, capped by another end marker: dropped."""

    def __init__(self, sink: EventSink) -> None:
        super().__init__(sink, (_LFM2_END,), _drop_echo, plausible=_echo_plausible)

    def close(self) -> bool:
        # No end marker came: it was not an echo, so the text is scanned as content.
        raise NotACallError("a list after the call without an end marker")


class Lfm2ToolParser(PythonicToolParser):
    """LFM2: ``<|tool_call_start|>[f(a=1)]<|tool_call_end|>``, text may follow.

    The list may hold JSON call objects instead (llama.cpp's LFM2 JSON-tools format:
    ``[{"name": "f", "arguments": {"a": 1}}]``).

    LFM2 often echoes the list after the call and caps it with a second end marker
    (``...<|tool_call_end|>[f(a=1)]<|tool_call_end|>``); vLLM drops everything up to
    that orphan marker, so the echo is not a second call and no marker reaches content.
    """

    start_markers = ("<|tool_call_start|>",)
    end_markers = (_LFM2_END,)
    drop_markers = ("<|im_end|>", _LFM2_END)

    def open_block(self, marker: str) -> Block | None:
        return SniffBlock(self._choose_body)

    def _choose_body(self, text: str, eof: bool) -> Block | object | None:
        """Python calls, or the JSON list llama.cpp's LFM2 format writes (``[{"name": ..}]``)."""
        body = text.lstrip()
        if body.startswith("["):
            body = body[1:].lstrip()
        if not body:
            return None if eof else NEED_MORE
        if body[0] == "{":
            return JsonBlock(CallListReader(self.sink), end_markers=self.end_markers)
        return JsonBlock(PyListReader(self.sink), end_markers=self.end_markers)

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        if not self.sink.calls_started:
            return super().leading_block(text, eof)
        # Right after a call a list is the echo, never an unmarked call.
        return _Lfm2Echo(self.sink) if text.startswith("[") else None


class Olmo3ToolParser(PythonicToolParser):
    """Olmo 3: ``<function_calls>f(a=1)\\ng()</function_calls>``, one call per line."""

    start_markers = ("<function_calls>",)
    end_markers = ("</function_calls>",)
    drop_markers = ("<|im_end|>", "<|endoftext|>")

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        return None

    def open_block(self, marker: str) -> Block | None:
        return BufferedBlock(self.sink, self.end_markers, _parse_lines)


def _parse_lines(body: str, final: bool) -> list[RawCall] | None:
    if final:
        return None  # a call list cut off before its close tag may be missing calls
    try:
        parsed, _ = parse_calls(body.strip(), bracketed=False, final=True)
    except PyLitError:
        return None
    return _to_calls(parsed) or None
