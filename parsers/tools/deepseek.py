"""DeepSeek tool calls: V3/R1 fenced JSON, V3.1 plain JSON, V3.2/V4 DSML.

V3 / R1 (both call-body forms are accepted by both parsers; models mix them up)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>``; a call section
may end the reasoning without ``</think>`` (with thinking on, the prompt opens ``<think>``,
so the output starts inside the reasoning).  V3.2 (``<｜DSML｜function_calls>``) and V4
(``<｜DSML｜tool_calls>``) write ``invoke``/``parameter`` tags: a ``string="true"`` value is
text whatever the schema says, a ``string="false"`` value is JSON typed by the schema.  A
lone ``arguments``/``input`` parameter the schema does not declare, holding an object (or
its JSON text) whose keys the schema declares, is unwrapped into the arguments (vLLM's
rule).  An invoke holding a JSON object instead of parameters takes it as the arguments
(SGLang's DSML detector).  The bars and spaces are U+FF5C and U+2581, copied byte-exactly.
"""

from __future__ import annotations

import re
from functools import cache

from ..block import Block
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock
from ..xmlcall import XmlInvokeBlock, XmlSyntax

__all__ = ["DeepSeekV3ToolParser", "DeepSeekV4ToolParser", "DeepSeekV31ToolParser", "DeepSeekV32ToolParser"]

_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
_CALL_BEGIN = "<｜tool▁call▁begin｜>"
_CALL_END = "<｜tool▁call▁end｜>"
_SEP = "<｜tool▁sep｜>"
_EOS = "<｜end▁of▁sentence｜>"
_HEADER = re.compile(
    r"\s*(?:function\s*" + _SEP + r"\s*(?P<v3>[^\s<`{]+)|(?P<v31>[^\s<`{]+)\s*" + _SEP + r")\s*(?:```(?:json)?)?\s*"
)


def _parse_header(text: str) -> tuple[str, None] | None:
    m = _HEADER.fullmatch(text)
    return ((m.group("v3") or m.group("v31")), None) if m else None


class DeepSeekV3ToolParser(ToolStream):
    """DeepSeek V3 / R1 / R1-0528 call blocks."""

    start_markers = (_CALL_BEGIN,)
    end_markers = (_CALL_END,)
    # The hallucinated ``<｜tool▁calls｜>`` is treated like the section marker (llama.cpp does).
    drop_markers = (_CALLS_BEGIN, "<｜tool▁calls▁end｜>", "<｜tool▁calls｜>", _EOS)

    def open_block(self, marker: str) -> Block | None:
        reader = HeaderArgsReader(self.sink, _parse_header, stops=(_CALL_END,), max_header=256)
        return JsonBlock(reader, end_markers=(_CALL_END,), fenced=True)


class DeepSeekV31ToolParser(DeepSeekV3ToolParser):
    """DeepSeek V3.1: no ``function`` prefix and no fence; the section ends thinking."""

    reasoning_exit_markers = (_CALLS_BEGIN,)


@cache
def _dsml(wrapper: str) -> XmlSyntax:
    bar = "｜DSML｜"
    return XmlSyntax(
        invoke_open=re.compile(r"<" + bar + r'invoke\s+name="(?P<name>[^"]+)"\s*>'),
        invoke_prefix="<" + bar + "invoke",
        invoke_close="</" + bar + "invoke>",
        param_open=re.compile(r"<" + bar + r'parameter\s+name="(?P<key>[^"]+)"(?:\s+string="(?P<string>\w+)")?\s*>'),
        param_prefix="<" + bar + "parameter",
        param_close="</" + bar + "parameter>",
        block_close=("</" + bar + wrapper + ">",),
        unwrap_keys=("arguments", "input"),
        json_body=True,
    )


class DeepSeekV32ToolParser(ToolStream):
    """DeepSeek V3.2 DSML ``<｜DSML｜function_calls>`` blocks."""

    wrapper = "function_calls"
    start_markers = ("<｜DSML｜function_calls>",)
    end_markers = ("</｜DSML｜function_calls>",)
    drop_markers = (_EOS,)

    def open_block(self, marker: str) -> Block | None:
        return XmlInvokeBlock(self.sink, _dsml(self.wrapper))


class DeepSeekV4ToolParser(DeepSeekV32ToolParser):
    """DeepSeek V4: the DSML wrapper is ``tool_calls`` (``function_calls`` is rejected)."""

    wrapper = "tool_calls"
    start_markers = ("<｜DSML｜tool_calls>",)
    end_markers = ("</｜DSML｜tool_calls>",)
