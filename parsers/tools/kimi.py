"""Kimi K2 (Instruct, Thinking) tool calls with native ids.

Layout (one section, calls inside)::

    <|tool_calls_section_begin|>
      <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|>
      <|tool_call_begin|>functions.get_news:1<|tool_call_argument_begin|>{}<|tool_call_end|>
    <|tool_calls_section_end|>

The id ``functions.NAME:IDX`` counts across the conversation and is returned verbatim.
Variants: no ``functions.`` prefix; a bare counter, where the name is inferred from the
argument keys when exactly one offered tool fits; the singular
``<|tool_call_section_begin|>``.  K2-Thinking may open the section before ``</think>``,
which ends the reasoning.
"""

from __future__ import annotations

import re

from ..block import Block
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock

__all__ = ["KimiK2ToolParser"]

_SECTIONS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_CALL_END = "<|tool_call_end|>"
_HEADER = re.compile(
    r"\s*(?P<id>(?:functions\.)?(?P<name>[\w.\-]+?)(?::(?P<idx>\d+))?)\s*<\|tool_call_argument_begin\|>\s*"
)


def _parse_header(text: str) -> tuple[str | None, str | None] | None:
    m = _HEADER.fullmatch(text)
    if not m:
        return None
    name, idx = m.group("name"), m.group("idx")
    if idx is None and name.isdigit():
        return None, None  # bare counter: the name comes from the arguments
    return name.removeprefix("functions."), (m.group("id") if idx is not None else None)


class KimiK2ToolParser(ToolStream):
    """Kimi K2 call sections."""

    start_markers = ("<|tool_call_begin|>",)
    end_markers = (_CALL_END,)
    drop_markers = (*_SECTIONS, "<|tool_calls_section_end|>", "<|tool_call_section_end|>", "<|im_end|>")
    reasoning_exit_markers = _SECTIONS

    def open_block(self, marker: str) -> Block | None:
        reader = HeaderArgsReader(self.sink, _parse_header, stops=(_CALL_END,), max_header=256,
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
