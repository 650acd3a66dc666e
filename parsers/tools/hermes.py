"""Hermes / Qwen2.5 / Qwen3 ``<tool_call>{json}</tool_call>``, with the drift models emit.

Accepted besides the canonical block (llama.cpp's Hermes 2 Pro tolerances):
``<function=NAME>{json}</function>``, ``<function name="NAME">{json}</function>``, a
Qwen3-Coder XML body inside ``<tool_call>``, the JSON wrapped in ``<tools>``/``<tool>``/
``<response>``/``<json>``/``<xml>`` or in a ``json`` code fence, ``"arguments"`` written
as a JSON string (Granite 4, fine-tunes), and a whole message that is bare JSON naming
an offered tool.  An unterminated ``<tool_call>`` whose JSON is complete still counts.
Granite 4 and ERNIE 4.5 use the same format.
"""

from __future__ import annotations

import re

from ..block import NEED_MORE, Block, BufferedBlock, SniffBlock
from ..engine import ToolStream
from ..jsonblock import HeaderArgsReader, JsonBlock
from ..jsoncall import CallKeys, CallListReader, json_body_calls
from ..xmlcall import QWEN3_XML, XmlInvokeBlock

__all__ = ["Ernie45ToolParser", "Granite4ToolParser", "HermesToolParser"]

_WRAPPERS = {"<tools>": "</tools>", "<tool>": "</tool>", "<response>": "</response>",
             "<json>": "</json>", "<xml>": "</xml>"}
_KEYS = CallKeys()
_WRAPPER_KEYS = CallKeys(require_args=True)  # wrappers are common words: demand a real call shape
_FUNCTION_NAME = re.compile(r"\s*(?P<name>[\w.\-:/]+)\s*>?\s*")
_FUNCTION_ATTR = re.compile(r'\s*(?P<name>[\w.\-:/]+)"\s*>\s*')


class HermesToolParser(ToolStream):
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks."""

    start_markers = ("<tool_call>", "<function=", '<function name="', *_WRAPPERS)
    end_markers = ("</tool_call>",)
    drop_markers = ("<|im_end|>", "<|endoftext|>")
    bare_calls = True

    def open_block(self, marker: str) -> Block | None:
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
