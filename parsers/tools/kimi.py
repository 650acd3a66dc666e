"""Kimi K2 (Instruct, Thinking) tool calls with native ids.

Layout (one section, calls inside)::

    <|tool_calls_section_begin|>
      <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|>
      <|tool_call_begin|>functions.get_news:1<|tool_call_argument_begin|>{}<|tool_call_end|>
    <|tool_calls_section_end|>

The id ``functions.NAME:IDX`` counts across the conversation and is returned verbatim.
Variants: no ``functions.`` prefix; a bare counter, where the name is inferred from the
argument keys when exactly one offered tool fits (the counter is kept as the id); the singular
``<|tool_call_section_begin|>``.  A call whose id is neither (``functions.get.0``) is
skipped, as vLLM does.  Text inside a section that is not a call (before the first
call, between calls, after the last) is model noise and is dropped; a section end that
closes nothing, before any call, is text like the rest of a message that holds no call.  K2-Thinking may
open the section before ``</think>``, which ends the reasoning.
"""

from __future__ import annotations

import re

from ..base import RawCall
from ..block import NEED_MORE, Block, BufferedBlock, SniffBlock, find_first, partial_suffix_len
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock
from ..sink import EventSink

__all__ = ["KimiK2ToolParser"]

_SECTIONS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_SECTION_ENDS = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
_CALL_BEGIN = "<|tool_call_begin|>"
_ARGS_BEGIN = "<|tool_call_argument_begin|>"
_CALL_END = "<|tool_call_end|>"
_MAX_HEADER = 256
_HEADER = re.compile(
    r"\s*(?P<id>(?:functions\.)?(?P<name>[\w.\-]+?)(?::(?P<idx>\d+))?)\s*<\|tool_call_argument_begin\|>\s*"
)
_VALID_ID = re.compile(r"\s*(?:(?:functions\.)?[\w.\-]+?:\d+|\d+)\s*")
"""``[functions.]NAME:IDX`` or a bare counter; anything else is not a call id."""


def _parse_header(text: str) -> tuple[str | None, str | None] | None:
    m = _HEADER.fullmatch(text)
    if not m:
        return None
    name, idx = m.group("name"), m.group("idx")
    if idx is None:
        # A bare counter carries no name (it comes from the arguments) but is the model's
        # own id, kept as vLLM does; the sink replaces it if an earlier call used it.
        return (None, name) if name.isdigit() else None
    return name.removeprefix("functions."), m.group("id")


def _skip_call(body: str, final: bool) -> list[RawCall]:
    return []


class _SectionNoise(Block):
    """Text of a section outside any call: dropped up to the next call or the section end."""

    _STOPS = (_CALL_BEGIN, *_SECTION_ENDS)

    def __init__(self, stream: KimiK2ToolParser) -> None:
        self._stream = stream
        self._held = ""  # a tail that may be the start of a stop marker

    def feed(self, text: str) -> int | None:
        buf = self._held + text
        idx, marker = find_first(buf, self._STOPS)
        if idx < 0:
            keep = partial_suffix_len(buf, self._STOPS)
            self._held = buf[len(buf) - keep :]
            return None
        if marker == _CALL_BEGIN:
            return idx - len(self._held)  # the call marker goes back to the stream
        self._stream.leave_section()
        return idx + len(marker) - len(self._held)

    def close(self) -> bool:
        return True  # noise at the end of the output is dropped as well


class _SectionEnd(Block):
    """The section end marker itself: nothing follows it inside the block."""

    def feed(self, text: str) -> int | None:
        return 0

    def close(self) -> bool:
        return True


class KimiK2ToolParser(ToolStream):
    """Kimi K2 call sections."""

    start_markers = (_CALL_BEGIN, *_SECTIONS, *_SECTION_ENDS)
    end_markers = (_CALL_END,)
    drop_markers = ("<|im_end|>",)
    reasoning_exit_markers = _SECTIONS

    def __init__(self, sink: EventSink) -> None:
        """Create the per-request state (outside any section)."""
        super().__init__(sink)
        self._in_section = False

    def leave_section(self) -> None:
        """The section ended: text after it is content again."""
        self._in_section = False

    def emit_content(self, text: str) -> None:
        """Send text to content, except the layout between the calls of a section."""
        if self._in_section and self._at_call_pos and not text.strip():
            return
        super().emit_content(text)

    def open_block(self, marker: str) -> Block | None:
        if marker in _SECTIONS:
            self._in_section = True
            return _SectionNoise(self)
        if marker in _SECTION_ENDS:
            if not self._in_section and not self.sink.calls_started:
                # Closes nothing: the text around it is not a call (SGLang and vLLM keep it all).
                return None
            self.leave_section()
            return _SectionEnd()
        return SniffBlock(self._choose_call)

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        """After a call inside a section, what precedes the next call marker is noise."""
        if not self._in_section or text.startswith(_CALL_BEGIN):
            return None
        if not eof and _CALL_BEGIN.startswith(text):
            return NEED_MORE
        return _SectionNoise(self)

    def _choose_call(self, text: str, eof: bool) -> Block | object | None:
        """Read the call header first: a call with an invalid id is consumed silently.

        Only the header's own ``<|tool_call_argument_begin|>`` counts (one before any other
        call marker, within the longest plausible header), so the choice does not depend
        on how much text has arrived.
        """
        window = text[: _MAX_HEADER + len(_ARGS_BEGIN)]
        head, marker = find_first(window, (_ARGS_BEGIN, _CALL_END, _CALL_BEGIN))
        if head < 0:
            if not eof and len(text) < _MAX_HEADER + len(_ARGS_BEGIN):
                return NEED_MORE
            return self._call_block()  # no header: the reader rejects or truncates it
        if marker != _ARGS_BEGIN or _VALID_ID.fullmatch(text[:head]):
            return self._call_block()
        return BufferedBlock(self.sink, (_CALL_END,), _skip_call)

    def _call_block(self) -> Block:
        reader = HeaderArgsReader(self.sink, _parse_header, stops=(_CALL_END,), max_header=_MAX_HEADER,
                                  infer_name=self._infer_name)
        return JsonBlock(reader, end_markers=(_CALL_END,))

    def _infer_name(self, arguments: dict) -> str | None:
        """The one offered tool whose parameters fit the argument keys, if unambiguous."""
        keys = set(arguments)
        fits = []
        for name in self.tools.names:
            schema = self.tools.parameters(name) or {}
            props = set(schema.get("properties") or ())
            required = set(schema.get("required") or ())
            if keys <= props and required <= keys:
                fits.append(name)
        return fits[0] if len(fits) == 1 else None
