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
MiniMax-M1 writes one JSON call per line inside ``<tool_calls>``::

    <tool_calls>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    {"name": "get_time", "arguments": {}}
    </tool_calls>

A line that is not a call (bad JSON, no ``name`` or no ``arguments``) is skipped and the
other lines kept, as vLLM does.  Calls inside ``<think>`` are not calls: the reasoning
splitter takes the block when one is configured, and without one a closed think block
stays content as written.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from ..base import NotACallError
from ..block import Block, QuotedThinkBlock
from ..engine import ToolStream
from ..jsoncall import CallKeys, call_from_object
from ..schema import lenient_literal
from ..xmlcall import XmlInvokeBlock, XmlSyntax

if TYPE_CHECKING:
    from ..sink import EventSink

logger = logging.getLogger(__name__)

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
    # Some Step-3 outputs repeat the function name after the separator (vLLM's tests).
    skip_label=re.compile(r"[\w.\-]+"),
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


_M1_CLOSE = "</tool_calls>"
_M1_KEYS = CallKeys(args=("arguments",), require_args=True)


class _JsonLinesBlock(Block):
    """The body of ``<tool_calls>``: each line that holds a call is emitted when it ends."""

    _KEEP = len(_M1_CLOSE) - 1

    def __init__(self, sink: EventSink) -> None:
        self._sink = sink
        self._parts: list[str] = []  # the current line, not complete yet (joined only when it may end)
        self._size = 0
        self._tail = ""  # its last characters, where a split close tag may start
        self._seen = 0  # block input consumed before the current line
        self._calls = 0

    def feed(self, text: str) -> int | None:
        window = self._tail + text
        if "\n" not in text and _M1_CLOSE not in window:
            self._parts.append(text)
            self._size += len(text)
            self._tail = window[-self._KEEP :]
            return None
        base = self._size
        buf = "".join(self._parts) + text
        pos = 0
        while True:
            nl = buf.find("\n", pos)
            stop = buf.find(_M1_CLOSE, max(pos, base - self._KEEP))
            if stop >= 0 and (nl < 0 or stop < nl):
                self._take_line(buf[pos:stop], self._seen + stop)
                if not self._calls:
                    raise NotACallError("no call in the <tool_calls> block")
                return stop + len(_M1_CLOSE) - base
            if nl < 0:
                break
            self._take_line(buf[pos:nl], self._seen + nl + 1)
            pos = nl + 1
        self._seen += pos
        rest = buf[pos:]
        self._parts, self._size, self._tail = [rest], len(rest), rest[-self._KEEP :]
        return None

    def close(self) -> bool:
        line = "".join(self._parts)
        self._parts, self._size = [], 0
        if not line.strip():
            return self._calls > 0
        return self._take_line(line, self._seen + len(line))  # a cut-off line is a truncated call

    def _take_line(self, line: str, end: int) -> bool:
        """Emit the line's call, if it is one; ``end`` is where the line ends in the block."""
        text = line.strip()
        if not text:
            return True
        try:
            call = call_from_object(lenient_literal(text), _M1_KEYS) if text.startswith("{") else None
        except ValueError:
            call = None
        if call is None:
            logger.debug("skipping a line that is not a call: %.80r", text)
            return False
        self._sink.call(call)
        self._calls += 1
        self.committed = end
        return True


class MinimaxM1ToolParser(ToolStream):
    """MiniMax-M1 ``<tool_calls>`` with one JSON call object per line."""

    start_markers = ("<tool_calls>", "<think>")
    end_markers = (_M1_CLOSE,)

    def open_block(self, marker: str) -> Block | None:
        if marker == "<think>":
            return QuotedThinkBlock(self.sink, "</think>")
        return _JsonLinesBlock(self.sink)
