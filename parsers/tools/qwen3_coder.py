"""Qwen3-Coder / Qwen3.5 XML calls, and the families that reuse the grammar.

Format (values raw, typed by the tool schema, so ``["a", "b"]`` is a list where the schema
says array; one newline after the open tag and one before the close tag are layout, not
value)::

    <tool_call>
    <function=write_file>
    <parameter=path>
    src/a.py
    </parameter>
    </function>
    </tool_call>

String-typed values stream out as they arrive, so a long file edit is not buffered into
one delta.  A ``<parameter=`` line before the previous value's ``</parameter>`` starts the
next parameter (models drop the close tag; vLLM's Qwen3-Coder and Step-3.5 parsers do the
same).  Models drop the ``<tool_call>`` wrapper (a bare ``<function=`` is accepted)
or write JSON inside it (handled as Hermes).  Qwen3.5 may open a call while still
thinking: ``<tool_call>`` + ``<function=`` ends the reasoning implicitly.  Seed-OSS uses
the same grammar inside ``<seed:tool_call>``; Step-3.5 and ``qwen3_xml`` are the same
format under other names.
"""

from __future__ import annotations

from dataclasses import replace

from ..block import NEED_MORE, Block, QuotedThinkBlock, SniffBlock
from ..xmlcall import QWEN3_XML, XmlInvokeBlock
from .hermes import HermesToolParser

__all__ = ["Qwen3CoderToolParser", "Qwen3XmlToolParser", "SeedOssToolParser", "Step3p5ToolParser"]


class Qwen3CoderToolParser(HermesToolParser):
    """``<tool_call><function=N><parameter=k>v</parameter></function></tool_call>``."""

    start_markers = ("<tool_call>", "<function=")
    drop_markers = ("<|im_end|>", "<|endoftext|>")
    bare_calls = False
    reasoning_exit_markers = ("<tool_call>\n<function=", "<tool_call><function=")


class Qwen3XmlToolParser(Qwen3CoderToolParser):
    """vLLM's ``qwen3_xml`` name for the same format."""


class Step3p5ToolParser(Qwen3CoderToolParser):
    """Step-3.5 writes Qwen3-Coder XML (SGLang maps ``step3p5`` to it)."""


# vLLM's Seed-OSS parser closes a value only at ``</parameter>``: a ``<parameter=`` inside
# a value is text there, unlike Qwen3-Coder where it starts the next parameter.
_SEED_XML = replace(QWEN3_XML, block_close=("</seed:tool_call>",), open_ends_param=False)


class SeedOssToolParser(Qwen3CoderToolParser):
    """Seed-OSS: the Qwen3-Coder grammar inside ``<seed:tool_call>``.

    Its reasoning often quotes the call syntax; without a reasoning parser the think
    block reaches this parser, which keeps it as content and parses no call inside it.
    """

    start_markers = ("<seed:tool_call>", "<seed:think>")
    end_markers = ("</seed:tool_call>",)
    drop_markers = ("<seed:eos>",)
    reasoning_exit_markers = ()

    def open_block(self, marker: str) -> Block | None:
        if marker == "<seed:think>":
            return QuotedThinkBlock(self.sink, "</seed:think>")
        return SniffBlock(self._choose)

    def _choose(self, text: str, eof: bool):
        body = text.lstrip()
        if body.startswith("<function="):
            return XmlInvokeBlock(self.sink, _SEED_XML)
        if not eof and (not body or "<function=".startswith(body)):
            return NEED_MORE
        return self._json_or_none(text, eof, ("</seed:tool_call>",))
