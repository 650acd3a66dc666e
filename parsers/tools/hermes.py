"""Hermes / Qwen2.5 / Qwen3 ``<tool_call>{json}</tool_call>``, with the drift models emit.

Accepted besides the canonical block (llama.cpp's Hermes 2 Pro tolerances):
``<function=NAME>{json}</function>``, ``<function name="NAME">{json}</function>``, a
Qwen3-Coder XML body inside ``<tool_call>``, the JSON wrapped in ``<tools>``/``<tool>``/
``<response>``/``<json>``/``<xml>``/``<JSON>``/``<function_call>`` or in a ``json`` code
fence, a wrapped call inside a ```` ```xml ````/```` ```json ```` fence (the fence is part
of the call), ``"arguments"`` written as a JSON string (Granite 4, fine-tunes), and a
whole message that is bare JSON naming an offered tool.  An unterminated ``<tool_call>``
whose JSON is complete still counts.  Granite 4 and ERNIE 4.5 use the same format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base import NotACallError, RawCall
from ..block import NEED_MORE, Block, BufferedBlock, SniffBlock
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock
from ..jsoncall import CallKeys, CallListReader, json_body_calls
from ..xmlcall import QWEN3_XML, XmlInvokeBlock

if TYPE_CHECKING:
    from ..sink import EventSink

__all__ = ["Ernie45ToolParser", "FenceMarkerHold", "Granite4ToolParser", "HermesToolParser", "fenced_call_block"]

_WRAPPERS = {"<tools>": "</tools>", "<tool>": "</tool>", "<response>": "</response>",
             "<json>": "</json>", "<xml>": "</xml>", "<JSON>": "</JSON>",
             "<function_call>": "</function_call>"}
_FENCE_WRAPPERS = {"<tool_call>": "</tool_call>", **_WRAPPERS}
_FENCES = ("```xml", "```json")
_LONGEST_FENCE = max(map(len, _FENCES))
_KEYS = CallKeys()
_WRAPPER_KEYS = CallKeys(require_args=True)  # wrappers are common words: demand a real call shape
_FUNCTION_NAME = re.compile(r"\s*(?P<name>[\w.\-:/]+)\s*>?\s*")
_FUNCTION_ATTR = re.compile(r'\s*(?P<name>[\w.\-:/]+)"\s*>\s*')


def fenced_call_block(sink: EventSink, parse_body: Callable[[str], list[RawCall] | None],
                      started: Callable[[str], bool], plausible: Callable[[str], bool] | None = None) -> BufferedBlock:
    """A code fence opened at a line start, read as one unit up to its closing fence.

    A body that is no call goes back to content with both fences, so the engine's fence
    tracking stays right.  Cut off before the closing fence, a complete call still
    counts, a started one (``started(body)``) is truncated, anything else is content.

    Args:
        sink: Where calls go.
        parse_body: The calls in the text between the fences (after the language tag),
            or None.
        started: True when a body without its closing fence began like a call.
        plausible: False once the body's start rules a call out: the fence then goes back to
            content at once and streams as it arrives, instead of waiting for its closing fence.

    Returns:
        The block, fed from just after the opening fence marker.
    """
    def parse(body: str, final: bool) -> list[RawCall] | None:
        calls = parse_body(body)
        if calls is not None or not final or started(body):
            return calls
        raise NotACallError("an unclosed code fence that holds no call")

    return BufferedBlock(sink, ("```",), parse, strict=True, plausible=plausible)


def _partial_fence_len(text: str, fences: tuple[str, ...]) -> int:
    """Length of the longest suffix that is ```` ``` ```` plus a proper prefix of a fence's tag."""
    for n in range(max(map(len, fences), default=0) - 1, 3, -1):
        if len(text) >= n and any(len(f) > n and f.startswith(text[-n:]) for f in fences):
            return n
    return 0


class FenceMarkerHold(ToolStream):
    """Holds back a chunk end such as ```` ```js ```` until it is known whether it grows
    into a fence marker of the family (```` ```json ````).

    The engine waits for a marker that may grow only while the text ends exactly at it
    (```` ``` ````); one more character would make it open a plain code fence instead.
    """

    def __init__(self, sink: EventSink) -> None:
        super().__init__(sink)
        self._fences = tuple(m for m in type(self).start_markers if m.startswith("```") and len(m) > 3)
        self._held = ""

    def feed(self, text: str) -> None:
        text, self._held = self._held + text, ""
        # The engine may already hold the ``` part at the end of its own buffer.
        tail = (self._pending[-_LONGEST_FENCE:] + text)[-_LONGEST_FENCE:]
        keep = min(len(text), _partial_fence_len(tail, self._fences)) if "```" in tail else 0
        if keep:
            text, self._held = text[:-keep], text[-keep:]
        super().feed(text)

    def finish(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            super().feed(held)
        super().finish()


def _fenced_wrapper_calls(body: str) -> list[RawCall] | None:
    """llama.cpp's fenced drift: the fence holds one wrapper tag around the call JSON."""
    text = body.strip()
    for open_tag, close_tag in _FENCE_WRAPPERS.items():
        if text.startswith(open_tag) and text.endswith(close_tag) and len(text) >= len(open_tag + close_tag):
            keys = _KEYS if open_tag == "<tool_call>" else _WRAPPER_KEYS
            return json_body_calls(text[len(open_tag) : len(text) - len(close_tag)], keys)
    return None


def _fenced_wrapper_started(body: str) -> bool:
    return body.lstrip().startswith(tuple(_FENCE_WRAPPERS))


def _fenced_wrapper_plausible(body: str) -> bool:
    """The body so far may still open with a wrapper tag (an answer's JSON or XML code is no call)."""
    head = body.lstrip()
    return any(head.startswith(tag) or tag.startswith(head) for tag in _FENCE_WRAPPERS)


class HermesToolParser(FenceMarkerHold):
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks."""

    start_markers = ("<tool_call>", "<function=", '<function name="', *_WRAPPERS, *_FENCES)
    end_markers = ("</tool_call>",)
    drop_markers = ("<|im_end|>", "<|endoftext|>")
    bare_calls = True

    def open_block(self, marker: str) -> Block | None:
        if marker in _FENCES:
            if not self._line_blank:
                return None  # mid-line it is no fence: the marker stays text, as for the engine
            return fenced_call_block(self.sink, _fenced_wrapper_calls, _fenced_wrapper_started, _fenced_wrapper_plausible)
        if marker == "<tool_call>":
            return SniffBlock(self._choose_tool_call_body)
        if marker == "<function=":
            return SniffBlock(self._choose_function_body)
        if marker == '<function name="':
            return self._header_block(_FUNCTION_ATTR, "</function>")
        close = _WRAPPERS[marker]
        return SniffBlock(lambda text, eof: self._json_or_none(text, eof, (close,), _WRAPPER_KEYS))

    # -- bodies ----------------------------------------------------------------------------

    def _json_block(self, ends: tuple[str, ...], keys: CallKeys = _KEYS) -> JsonBlock:
        def lenient() -> Block:
            return BufferedBlock(self.sink, ends, lambda body, final: json_body_calls(body, keys))

        return JsonBlock(CallListReader(self.sink, keys), end_markers=ends, fenced=True, fallback=lenient)

    def _json_or_none(self, text: str, eof: bool, ends: tuple[str, ...], keys: CallKeys = _KEYS):
        body = text.lstrip()
        if not body:
            return None if eof else NEED_MORE
        if body[0] in "{[" or body.startswith("```"):
            return self._json_block(ends, keys)
        if "```".startswith(body) and not eof:
            return NEED_MORE
        return None

    def _choose_tool_call_body(self, text: str, eof: bool):
        body = text.lstrip()
        if body.startswith("<function="):
            return self._choose_function_body(body[len("<function=") :], eof, inner=True)
        if "<function=".startswith(body) and body and not eof:
            return NEED_MORE
        return self._json_or_none(text, eof, ("</tool_call>",))

    def _choose_function_body(self, text: str, eof: bool, inner: bool = False):
        """``<function=NAME>`` then ``{json}`` (Functionary/Llama style) or XML parameters."""
        close = text.find(">")
        if close < 0:
            return None if eof or len(text) > 256 else NEED_MORE
        after = text[close + 1 :].lstrip()
        if not after and not eof:
            return NEED_MORE
        ends = ("</function>", "</tool_call>") if inner else ("</function>",)
        if after.startswith("{"):
            return self._header_block(_FUNCTION_NAME, *ends, prefix_skip=inner)
        if after.startswith("<"):
            return XmlInvokeBlock(self.sink, QWEN3_XML, initial="" if inner else "<function=")
        return None

    def _header_block(self, header: re.Pattern[str], *ends: str, prefix_skip: bool = False) -> JsonBlock:
        def parse(text: str):
            if prefix_skip:
                text = text.lstrip().removeprefix("<function=")
            m = header.fullmatch(text)
            return (m.group("name"), None) if m else None

        ends_all = ends if "</tool_call>" in ends else (*ends, "</tool_call>")
        return JsonBlock(HeaderArgsReader(self.sink, parse), end_markers=ends_all)


class Granite4ToolParser(HermesToolParser):
    """Granite 4: Hermes blocks, arguments often a JSON string (decoded once)."""

    drop_markers = ("<|end_of_text|>",)


class Ernie45ToolParser(HermesToolParser):
    """ERNIE 4.5 (Thinking): ``<tool_call>`` JSON blocks after ``</think>``."""

    drop_markers = ("</s>",)
