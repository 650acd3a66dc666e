"""Streaming block for XML-ish invoke/parameter formats with raw-text values.

Covers Qwen3-Coder / Qwen3.5 (``<function=N><parameter=k>v</parameter></function>``),
Seed-OSS, MiniMax-M2 (``<invoke name="N"><parameter name="k">``), DeepSeek DSML and
Step-3 through one ``XmlSyntax`` description each::

    <block>  invoke_open  param_open VALUE param_close ...  invoke_close  ...  block_close

A value cannot escape its closing tag, so a ``param_close`` only counts when the next
non-space text is another parameter, the invoke close, the block close or the end of
output; otherwise it is part of the value (a file containing ``</parameter>``).  Values
typed as plain strings (or flagged ``string="true"`` by DSML) stream out as they arrive;
others are typed by the schema when they close.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import NotACallError
from .block import Block, find_first, partial_suffix_len
from .jsonstream import JsonReader, JsonSyntaxError
from .schema import Fallback, coerce_value, lenient_literal

if TYPE_CHECKING:
    from .sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["QWEN3_XML", "XmlInvokeBlock", "XmlSyntax"]


@dataclass(frozen=True)
class XmlSyntax:
    """Tag grammar of one XML-ish family."""

    invoke_open: re.Pattern[str]
    """Whole invoke open tag (matched at the tag start); group ``name``."""
    invoke_prefix: str
    invoke_close: str
    param_open: re.Pattern[str]
    """Whole parameter open tag; group ``key`` and optionally ``string`` (DSML)."""
    param_prefix: str
    param_close: str
    block_close: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    """Literal noise allowed before an invoke (Step-3's ``function<｜tool_sep｜>``)."""
    skip_label: re.Pattern[str] | None = None
    """Text allowed right after a ``skip`` literal, up to the invoke; ignored, as the
    invoke tag names the call (Step-3's ``function<｜tool_sep｜>NAME\n``)."""
    trim_newline: bool = False
    """Drop one newline after the open tag and one before the close tag (Qwen3-Coder)."""
    fallback: Fallback = "string"
    unwrap_keys: tuple[str, ...] = ()
    """A lone parameter with one of these names, absent from the schema, holding an object
    whose keys the schema declares, is the whole arguments (DSML's ``arguments``/``input``)."""
    json_body: bool = False
    """An invoke may hold one JSON object instead of parameters (DSML, as SGLang reads it)."""
    open_ends_param: bool = False
    """A parameter open tag at a line start inside a value, naming a parameter not given
    yet (one the schema declares, when it declares any), ends that value: models drop
    ``</parameter>`` (Qwen3-Coder)."""
    max_tag: int = 512


def _encode(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class XmlInvokeBlock(Block):
    """Parses one block of invokes, streaming string values as argument deltas."""

    def __init__(self, sink: EventSink, syntax: XmlSyntax, *, initial: str = "") -> None:
        """Create the block.

        Args:
            sink: Where calls go.
            syntax: The family's tag grammar.
            initial: Text consumed as the start marker that belongs to the grammar
                (``<function=`` when the wrapper was dropped).
        """
        self._sink, self._s = sink, syntax
        self._buf = initial
        self._initial = len(initial)
        self._used = 0
        self._state = "outer"
        self._calls = 0
        self._eof = False
        self._done = False
        self._after_skip = False  # a skip literal was just consumed: a label may follow

    # -- Block protocol ----------------------------------------------------------------

    def feed(self, text: str) -> int | None:
        self._buf += text
        self._run()
        if not self._done:
            return None
        return len(text) - len(self._buf)

    def close(self) -> bool:
        self._eof = True
        self._run()
        if self._state == "outer" and self._calls:
            self.leftover = self._buf
            return True
        return False

    # -- driver --------------------------------------------------------------------------

    def _run(self) -> None:
        step = {"outer": self._outer, "invoke": self._invoke, "value": self._value, "json": self._json}
        while not self._done and step[self._state]():
            pass

    def _consume(self, n: int) -> None:
        self._buf = self._buf[n:]
        self._used += n

    def _skip_ws(self) -> str:
        stripped = self._buf.lstrip()
        self._consume(len(self._buf) - len(stripped))
        return stripped

    def _waiting(self, text: str, literals: tuple[str, ...]) -> bool:
        """True if ``text`` may still grow into one of ``literals``."""
        return not self._eof and any(lit.startswith(text) for lit in literals if len(text) < len(lit))

    def _tag(self, pattern: re.Pattern[str]) -> re.Match[str] | bool | None:
        """Match a complete tag at the buffer start; False means wait for more text."""
        end = self._buf.find(">")
        if end < 0:
            if len(self._buf) > self._s.max_tag or self._eof:
                return None
            return False
        return pattern.match(self._buf[: end + 1])

    def _outer(self) -> bool:
        s = self._s
        buf = self._skip_ws()
        if not buf:
            if self._eof and self._calls:
                self._done = True
            return False
        for lit in s.block_close:
            if buf.startswith(lit):
                self._consume(len(lit))
                self._done = True
                return False
        for lit in s.skip:
            if buf.startswith(lit):
                self._consume(len(lit))
                self._after_skip = True
                return True
        label = self._skip_label(buf)
        if label is None:
            return False
        if label:
            self._consume(label)
            return True
        if buf.startswith(s.invoke_prefix):
            m = self._tag(s.invoke_open)
            if m is False:
                return False
            if m is None:
                return self._not_an_invoke()
            self._open_invoke(m.group("name").strip())
            self._consume(m.end())
            return True
        if self._waiting(buf, (s.invoke_prefix, *s.block_close, *s.skip)):
            return False
        return self._not_an_invoke()

    def _skip_label(self, buf: str) -> int | None:
        """Length of a label after a skip literal to drop (0: none); None: wait for more."""
        pattern = self._s.skip_label
        if not self._after_skip or pattern is None:
            return 0
        m = pattern.match(buf)
        if m is None or not m.end():
            self._after_skip = False
            return 0
        if m.end() == len(buf) and not self._eof:
            return None  # the label may go on in the next chunk
        self._after_skip = False
        return m.end()

    def _not_an_invoke(self) -> bool:
        if not self._calls:
            raise NotACallError("no invoke in the block")
        self._done = True  # tolerate a missing block close: the rest is content
        return False

    def _open_invoke(self, name: str) -> None:
        if not name:
            raise NotACallError("invoke without a name")
        self._name, self._args, self._members = name, {}, 0
        self._deferred: tuple[str, Any] | None = None
        self._json_args = False  # the arguments came as one JSON object
        self._sink.start(name)
        self._state = "invoke"

    def _invoke(self) -> bool:
        s = self._s
        buf = self._skip_ws()
        if not buf:
            return False
        if buf.startswith(s.invoke_close):
            self._consume(len(s.invoke_close))
            self._close_invoke()
            return True
        if s.json_body and buf.startswith("{") and not self._members and self._deferred is None:
            self._reader = JsonReader()
            self._state = "json"
            return True
        if buf.startswith(s.param_prefix) and not self._json_args:
            m = self._tag(s.param_open)
            if m is False:
                return False
            if m is None:
                raise NotACallError("malformed parameter tag")
            self._consume(m.end())
            self._open_param(m.group("key").strip(), m.groupdict().get("string"))
            return True
        if self._waiting(buf, (s.invoke_close, s.param_prefix)):
            return False
        lt = buf.find("<", 1)  # stray text between parameters: skip it
        self._consume(lt if lt > 0 else len(buf))
        return True

    def _json(self) -> bool:
        """A JSON object as the whole arguments, streamed as it re-emits compactly."""
        try:
            used = self._reader.feed(self._buf)
        except JsonSyntaxError as exc:
            raise NotACallError(f"bad JSON arguments: {exc}") from None
        self._consume(used)
        self._sink.args(self._reader.take())
        if not self._reader.done:
            return False
        if not isinstance(self._reader.value, dict):
            raise NotACallError("the JSON arguments are not an object")
        self._args, self._json_args, self._members = self._reader.value, True, 1
        self._state = "invoke"
        return True

    # -- parameters ------------------------------------------------------------------------

    def _open_param(self, key: str, string_flag: str | None) -> None:
        tools = self._sink.tools
        self._key, self._flag = key, string_flag
        self._mute = self._given(key)
        self._wrapper = (
            key in self._s.unwrap_keys and self._members == 0 and self._deferred is None
            and key not in self._schema_keys()
        )
        # DSML's string="true" says the value is text whatever the schema says.
        self._stream = (
            not self._mute
            and not self._wrapper
            and string_flag != "false"
            and (string_flag == "true" or tools.only_string(self._name, key, default=self._s.fallback == "string"))
        )
        self._parts: list[str] = []
        self._started = False
        self._state = "value"
        if self._stream:
            self._flush_deferred()
            self._sink.args(self._member_prefix(key) + '"')

    def _given(self, key: str) -> bool:
        """True if the invoke already has a value for ``key`` (a repeat is ignored)."""
        return key in self._args or (self._deferred is not None and key == self._deferred[0])

    def _schema_keys(self) -> frozenset[str]:
        props = (self._sink.tools.parameters(self._name) or {}).get("properties")
        return frozenset(props) if isinstance(props, dict) else frozenset()

    def _member_prefix(self, key: str) -> str:
        prefix = ("{" if self._members == 0 else ",") + json.dumps(key, ensure_ascii=False) + ":"
        self._members += 1
        return prefix

    def _value(self) -> bool:
        s = self._s
        if not self._started:
            if not self._buf:
                return False
            if s.trim_newline and self._buf[0] == "\n":
                self._consume(1)
            self._started = True
        buf, pos, safe = self._buf, 0, None
        closers = (s.param_close, s.invoke_close, *((s.param_prefix,) if s.open_ends_param else ()))
        while safe is None:
            p, tag = find_first(buf, closers, pos)
            if p < 0:
                safe = len(buf) - self._partial(buf, closers)
                break
            if tag == s.param_prefix:
                verdict = self._opens_next(buf, p)
                tag = ""  # the open tag stays for the next parameter
            else:
                verdict = self._confirmed(buf[p + len(tag) :], tag)
            if verdict:
                self._end_value(p, tag)
                return True
            if verdict is None:
                safe = p
            pos = p + 1
        if s.trim_newline and safe > 0 and buf[safe - 1] == "\n" and not self._eof:
            safe -= 1  # may be the newline the close tag takes with it
        if safe > 0:
            self._take(buf[:safe])
        return False

    def _opens_next(self, buf: str, p: int) -> bool | None:
        """Does the parameter open tag at ``buf[p]``, inside a value, start the next one?

        Only at a line start (the template writes each tag on its own line) and only for
        a parameter not given yet: a value quoting ``<parameter=x>`` mid-line, or naming
        a parameter already set, stays text.  None: the tag is not complete yet.
        """
        line_start = buf[p - 1] == "\n" if p else (not self._parts or self._parts[-1].endswith("\n"))
        if not line_start:
            return False
        end = buf.find(">", p)
        if end < 0:
            return False if self._eof or len(buf) - p > self._s.max_tag else None
        m = self._s.param_open.match(buf[p : end + 1])
        if m is None:
            return False
        key = m.group("key").strip()
        known = self._schema_keys()
        return key != self._key and not self._given(key) and (not known or key in known)

    def _partial(self, buf: str, tags: tuple[str, ...]) -> int:
        return 0 if self._eof else partial_suffix_len(buf, tags)

    def _confirmed(self, after: str, tag: str) -> bool | None:
        s = self._s
        after = after.lstrip()
        if tag == s.param_close:
            nexts = (s.param_prefix, s.invoke_close, *s.block_close)
        else:
            nexts = (s.invoke_prefix, *s.block_close, *s.skip)
        if not after:
            return True if self._eof else None
        if any(after.startswith(n) for n in nexts):
            return True
        return None if self._waiting(after, nexts) else False

    def _take(self, text: str) -> None:
        self._parts.append(text)
        self._consume(len(text))
        if self._stream:
            self._sink.args(_encode(text))

    def _end_value(self, end: int, tag: str) -> None:
        tail = self._buf[:end]
        self._consume(end + len(tag))
        if self._s.trim_newline and tail.endswith("\n"):
            tail = tail[:-1]
        raw = "".join(self._parts) + tail
        if self._stream:
            self._sink.args(_encode(tail) + '"')
            value: Any = raw
        elif self._flag == "true":
            value = raw
        else:
            schema = self._sink.tools.property_schema(self._name, self._key)
            value = coerce_value(raw, schema, "json" if self._flag == "false" else self._s.fallback)
        self._store(value)
        self._state = "invoke"
        if tag == self._s.invoke_close:
            self._close_invoke()

    def _store(self, value: Any) -> None:
        if self._mute:
            return
        key = self._key
        if not self._stream:
            if self._wrapper:
                self._deferred = (key, value)  # maybe the whole arguments: decide at the close
                return
            self._flush_deferred()
            self._sink.args(self._member_prefix(key) + json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        self._args[key] = value

    def _flush_deferred(self) -> None:
        if self._deferred is not None:
            key, value = self._deferred
            self._deferred = None
            self._sink.args(self._member_prefix(key) + json.dumps(value, ensure_ascii=False, separators=(",", ":")))
            self._args[key] = value

    def _unwrapped(self) -> dict | None:
        """The deferred wrapper's object, when it is the whole arguments.

        It is when it is an object (or text holding one: ``string="true"``) whose keys
        the schema declares, so an unknown tool never loses its ``arguments`` key.
        """
        if self._deferred is None:
            return None
        inner = self._deferred[1]
        if isinstance(inner, str):
            try:
                inner = lenient_literal(inner)
            except ValueError:
                return None
        if isinstance(inner, dict) and set(inner) <= self._schema_keys():
            return inner
        return None

    def _close_invoke(self) -> None:
        inner = self._unwrapped()
        if inner is not None:
            self._args = inner
            self._deferred = None
            self._sink.args(json.dumps(self._args, ensure_ascii=False, separators=(",", ":")))
        elif not self._json_args:
            self._flush_deferred()
            self._sink.args("}" if self._members else "{}")
        self._sink.end(self._args)
        self._calls += 1
        self.committed = self._used - self._initial
        self._state = "outer"


QWEN3_XML = XmlSyntax(
    invoke_open=re.compile(r"<function=(?P<name>[^>\n]+)>"),
    invoke_prefix="<function=",
    invoke_close="</function>",
    param_open=re.compile(r"<parameter=(?P<key>[^>\n]+)>"),
    param_prefix="<parameter=",
    param_close="</parameter>",
    block_close=("</tool_call>",),
    trim_newline=True,
    open_ends_param=True,
)
"""Qwen3-Coder / Qwen3.5 grammar, shared with the families that borrowed it."""
