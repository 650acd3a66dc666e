"""MiniMax-M2 and Step-3 XML invoke calls, and MiniMax-M1 JSON lines.

MiniMax-M2 (values raw, whitespace kept, typed by the schema including nullable
``anyOf``)::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    </minimax:tool_call>

Step-3 wraps ``<steptml:invoke>``/``<steptml:parameter>`` in DeepSeek-like call tokens
with ASCII underscores (``<｜tool_call_begin｜>function<｜tool_sep｜>...<｜tool_call_end｜>``).
MiniMax-M1 writes one JSON call per line inside ``<tool_calls>``; its calls inside
``<think>`` stay reasoning (the reasoning splitter runs first).
"""

from __future__ import annotations

import re

from ..block import Block
from ..engine import ToolStream
from ..jsonblock import JsonBlock
from ..jsoncall import CallListReader
from ..xmlcall import XmlInvokeBlock, XmlSyntax

__all__ = ["MinimaxM1ToolParser", "MinimaxM2ToolParser", "Step3ToolParser"]

_M2 = XmlSyntax(
    invoke_open=re.compile(r'<invoke\s+name="(?P<name>[^"]+)"\s*>'),
    invoke_prefix="<invoke",
    invoke_close="</invoke>",
    param_open=re.compile(r'<parameter\s+name="(?P<key>[^"]+)"\s*>'),
    param_prefix="<parameter",
    param_close="</parameter>",
    block_close=("</minimax:tool_call>",),
)

_STEP3 = XmlSyntax(
    invoke_open=re.compile(r'<steptml:invoke\s+name="(?P<name>[^"]+)"\s*>'),
    invoke_prefix="<steptml:invoke",
    invoke_close="</steptml:invoke>",
    param_open=re.compile(r'<steptml:parameter\s+name="(?P<key>[^"]+)"\s*>'),
    param_prefix="<steptml:parameter",
    param_close="</steptml:parameter>",
    block_close=("<｜tool_call_end｜>",),
    skip=("function<｜tool_sep｜>",),
)


class MinimaxM2ToolParser(ToolStream):
    """MiniMax-M2 ``<minimax:tool_call>`` blocks of ``invoke`` elements."""

    start_markers = ("<minimax:tool_call>",)
    end_markers = ("</minimax:tool_call>",)
    drop_markers = ("[e~[",)

    def open_block(self, marker: str) -> Block | None:
        return XmlInvokeBlock(self.sink, _M2)


class Step3ToolParser(ToolStream):
    """Step-3 ``<｜tool_call_begin｜>`` blocks around ``steptml:invoke``."""

    start_markers = ("<｜tool_call_begin｜>",)
    end_markers = ("<｜tool_call_end｜>",)
    drop_markers = ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>")

    def open_block(self, marker: str) -> Block | None:
        return XmlInvokeBlock(self.sink, _STEP3)


class MinimaxM1ToolParser(ToolStream):
    """MiniMax-M1 ``<tool_calls>`` with one JSON call object per line."""

    start_markers = ("<tool_calls>",)
    end_markers = ("</tool_calls>",)

    def open_block(self, marker: str) -> Block | None:
        reader = CallListReader(self.sink, sequence=",;")
        return JsonBlock(reader, end_markers=self.end_markers)
