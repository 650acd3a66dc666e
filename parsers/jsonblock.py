"""Blocks around JSON payloads: header + arguments, code fences, end markers, bare messages.

* ``HeaderArgsReader``: a textual header carrying the name (and maybe an id), then the
  arguments object (DeepSeek, Kimi K2, Mistral v11 ``name[ARGS]{...}``), streamed.
* ``JsonBlock``: wraps a payload reader (this one or ``CallListReader``) with an
  optional code fence, an optional end marker, and a lenient fallback for bodies that
  are not strict JSON (Python dicts).
* ``BareBlock``: a whole message that is a JSON call, accepted only at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .base import NotACallError, RawCall
from .block import Block, BufferedBlock, find_first
from .jsoncall import CallKeys, CallListReader, calls_from_value
from .jsonstream import JsonReader, JsonSyntaxError

if TYPE_CHECKING:
    from .sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["BareBlock", "HeaderArgsReader", "JsonBlock"]

_WS = " \t\r\n"
_DEFAULT_KEYS = CallKeys()


HeaderFn = Callable[[str], "tuple[str | None, str | None] | None"]
"""``parse_header(text)`` -> ``(name, id)``; name None means infer it later; None rejects."""


class HeaderArgsReader:
    """Payload reader for ``HEADER{arguments}``: the header is everything before ``{``."""

    def __init__(self, sink: EventSink, parse_header: HeaderFn, *, stops: Sequence[str] = (),
                 max_header: int = 512, infer_name: Callable[[dict], str | None] | None = None) -> None:
        """Configure the reader.

        Args:
            sink: Where the call goes.
            parse_header: Extracts name and id from the header text.
            stops: Markers that end a header with no arguments object (empty
                arguments); they are consumed with it.
            max_header: Longest plausible header; beyond it the block is not a call.
            infer_name: Names a call whose header carried none (Kimi's bare counter).
        """
        self._sink, self._parse_header = sink, parse_header
        self._stops, self._max, self._infer = tuple(stops), max_header, infer_name
        self._header = ""
        self._reader: JsonReader | None = None
        self._name: str | None = None
        self._id: str | None = None
        self.committed = 0
        self.done = False

    @property
    def started(self) -> bool:
        """True once the call was opened."""
        return self._name is not None or self.done

    def feed(self, text: str) -> int | None:
        """Consume text; return the characters used once the arguments object ended."""
        offset = 0
        if self._reader is None:
            before = len(self._header)
            self._header += text
            brace = self._header.find("{")
            stop, marker = find_first(self._header, self._stops)
            if stop >= 0 and (brace < 0 or stop < brace):
                self._begin(self._header[:stop])
                if self._name is not None:
                    self._sink.args("{}")
                self._finish_call({})
                return stop + len(marker) - before
            if brace < 0:
                if len(self._header) > self._max:
                    raise NotACallError("no arguments object after the header")
                return None
            self._begin(self._header[:brace])
            offset = brace - before
            self._reader = JsonReader()
        try:
            used = self._reader.feed(text[offset:])
        except JsonSyntaxError as exc:
            raise NotACallError(str(exc)) from None
        if self._name is not None:
            self._sink.args(self._reader.take())
        if not self._reader.done:
            return None
        self._finish_call(self._reader.value)
        return offset + used

    def finish(self) -> bool:
        """End of input: True if the call completed."""
        return self.done

    def _begin(self, header: str) -> None:
        parsed = self._parse_header(header)
        if parsed is None:
            raise NotACallError(f"unrecognised call header {header[:40]!r}")
        self._name, self._id = parsed
        if self._name is not None:
            self._sink.start(self._name, self._id)

    def _finish_call(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise NotACallError("arguments are not an object")
        if self._name is None:
            name = self._infer(value) if self._infer else None
            if not name:
                raise NotACallError("call without a name")
            self._sink.call(RawCall(name, value, self._id))
        else:
            self._sink.end(value)
        self.done = True
        self.committed = 1


class JsonBlock(Block):
    """A JSON payload, optionally inside a code fence, optionally closed by an end marker.

    Returned consumption counts may be negative (see ``Block.feed``) when a closer
    turns out to be absent and whitespace read earlier goes back to content.
    """

    def __init__(self, payload: CallListReader | HeaderArgsReader, *, end_markers: Sequence[str] = (),
                 fenced: bool = False, initial: str = "",
                 fallback: Callable[[], Block] | None = None) -> None:
        """Create the block.

        Args:
            payload: The reader for what follows the marker.
            end_markers: Optional closers consumed after the payload.
            fenced: Allow a Markdown code fence around the payload.
            initial: Text consumed as the start marker that belongs to the payload.
            fallback: Block that takes over if the JSON is malformed before any call
                started (lenient parsing of Python dicts and the like).
        """
        self._payload, self._ends, self._fenced = payload, tuple(end_markers), fenced
        self._closers = self._ends + (("```",) if fenced else ())
        self._fallback = fallback
        self._phase = "fence" if fenced else "payload"
        self._pre = ""
        self._tail = ""
        self._seen = [initial]  # payload text, kept for the fallback (joined only then)
        self._inner: Block | None = None
        if initial:
            payload.feed(initial)

    @property
    def committed(self) -> int:  # type: ignore[override]
        return self._inner.committed if self._inner is not None else self._payload.committed

    def feed(self, text: str) -> int | None:
        if self._inner is not None:
            return self._inner.feed(text)
        if self._phase != "fence":
            return self._feed_payload(text)
        self._pre += text
        stripped = self._pre.lstrip(_WS)
        if stripped.startswith("```"):
            nl = stripped.find("\n")
            if nl < 0:
                return None
            body = stripped[nl + 1 :]
        elif not stripped or "```".startswith(stripped):
            return None
        else:
            body = self._pre
        self._phase, self._pre = "payload", ""
        used = self._feed_payload(body)  # ``body`` ends where ``text`` ends
        return None if used is None else used - (len(body) - len(text))

    def _feed_payload(self, text: str) -> int | None:
        base = 0
        if self._phase == "payload":
            self._seen.append(text)
            try:
                used = self._payload.feed(text)
            except NotACallError:
                return self._fall_back(text)
            if used is None:
                return None
            base, self._phase = used, "tail"
        return self._feed_tail(text, base)

    def _feed_tail(self, text: str, base: int) -> int | None:
        prior = len(self._tail)
        self._tail += text[base:]
        k = len(self._tail) - len(self._tail.lstrip(_WS))
        if self._fenced and self._tail.startswith("```", k):
            k += 3
            k += len(self._tail) - k - len(self._tail[k:].lstrip(_WS))
        rest = self._tail[k:]
        for end in self._ends:
            if rest.startswith(end):
                return base + (k + len(end) - prior)
        if self._closers and (not rest or any(c.startswith(rest) for c in self._closers)):
            return None  # a closer may still come
        if k and self._fenced and self._tail[:k].strip().startswith("```"):
            return base + (k - prior)  # the closing fence belongs to the block
        return base - prior

    def close(self) -> bool:
        if self._inner is not None:
            return self._inner.close()
        if self._phase == "payload":
            return self._payload.finish()
        return self._phase == "tail"

    @property
    def malformed(self) -> bool:  # type: ignore[override]
        return self._inner is not None and self._inner.malformed

    def _fall_back(self, text: str) -> int | None:
        if self._payload.started and self._ends:
            # The call was already announced: the block runs to its end marker and its
            # text becomes content (never rescanned for a stray closer).
            self._inner = BufferedBlock(_NullSink(), self._ends, lambda body, final: None, strict=True)
        elif self._fallback is None or self._payload.started:
            raise NotACallError("malformed JSON call")
        else:
            self._inner = self._fallback()
        seen, self._seen = "".join(self._seen), []
        used = self._inner.feed(seen)
        return None if used is None else used - (len(seen) - len(text))


class _NullSink:
    """Sink for a block that only measures its extent."""

    def call(self, call: RawCall) -> None:
        raise AssertionError("a measuring block never emits calls")


class BareBlock(Block):
    """A whole message that is a JSON call or call list (only when tools were sent).

    Held until the end of output: only the complete message decides (a JSON answer that
    merely mentions a name is not a call), and every name must be an offered tool.  A
    JSON syntax error or text after the value releases the message as content early.
    """

    def __init__(self, sink: EventSink, keys: CallKeys = _DEFAULT_KEYS) -> None:
        self._sink, self._keys = sink, keys
        self._head = ""  # text until the opening fence line (if any) is complete
        self._fenced: bool | None = None
        self._reader = JsonReader()
        self._after = ""

    def feed(self, text: str) -> int | None:
        if self._fenced is None:
            self._head += text
            if self._head.startswith("```"):
                nl = self._head.find("\n")
                if nl < 0:
                    return None
                self._fenced, text = True, self._head[nl + 1 :]
            elif "```".startswith(self._head):
                return None
            else:
                self._fenced, text = False, self._head
        if not self._reader.done:
            try:
                text = text[self._reader.feed(text) :]
            except JsonSyntaxError as exc:
                raise NotACallError(str(exc)) from None
        if self._reader.done:
            self._after += text
            rest = self._after.strip()
            if rest and not (self._fenced and "```".startswith(rest)):
                raise NotACallError("text after the JSON value")
        return None

    def close(self) -> bool:
        self._reader.finish()
        calls = calls_from_value(self._reader.value, self._keys) if self._reader.done else None
        if not calls or not all(c.name in self._sink.tools.names for c in calls):
            raise NotACallError("the message is not a call to an offered tool")
        for call in calls:
            self._sink.call(call)
        return True
