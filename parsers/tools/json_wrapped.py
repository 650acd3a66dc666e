"""JSON calls inside a family-specific wrapper: one configuration table per family.

=================  ===========================================================
granite            ``<|tool_call|>[{...}]`` (3.1+ also ``<tool_call>[...]``)
granite-20b-fc     ``<function_call> {json}`` repeated
phi4_mini_json     ``functools[{"name": ..., "arguments": {...}}]`` (FireFunction v2)
xlam               bare ``[{...}]`` at call position, a ```` ```json ```` fence (also after text),
                   or after ``[TOOL_CALLS]``/``<tool_call>``/``</think>``
hunyuan_a13b       ``<tool_calls>[{...}]</tool_calls>`` (inside ``<answer>``)
jamba              ``<tool_calls>[{...}]</tool_calls>``
internlm           ``<|action_start|><|plugin|>{"name", "parameters"}<|action_end|>``
apertus            ``<|tools_prefix|>[{"NAME": {args}}]<|tools_suffix|>`` (suffix optional; an
                   output that ends after the last arguments object closes the list)
gigachat3          ``function call<|role_sep|>\\n{json}`` or ``<|function_call|>{json}``
=================  ===========================================================

Arguments stream as compact JSON while they arrive (see ``parsers.jsoncall``).
"""

from __future__ import annotations

from typing import ClassVar

from ..base import RawCall
from ..block import NEED_MORE, Block
from ..engine import ToolStream
from ..jsonblock import JsonBlock
from ..jsoncall import CallKeys, CallListReader, json_body_calls
from .hermes import FenceMarkerHold, fenced_call_block

__all__ = [
    "ApertusToolParser",
    "GigaChat3ToolParser",
    "Granite20bFcToolParser",
    "GraniteToolParser",
    "HunyuanA13bToolParser",
    "InternLmToolParser",
    "JambaToolParser",
    "Phi4MiniJsonToolParser",
    "XlamToolParser",
]


class _Wrapped(ToolStream):
    """A marker, then a call object or list, then an optional closer."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Start marker -> end markers accepted after the payload."""
    keys: ClassVar[CallKeys] = CallKeys()
    array: ClassVar[bool] = True
    single: ClassVar[bool] = True
    initial: ClassVar[str] = ""
    close_at_eof: ClassVar[bool] = False
    """An output that ends inside the list after complete arguments still completes it."""

    def open_block(self, marker: str) -> Block | None:
        reader = CallListReader(self.sink, self.keys, array=self.array, single=self.single,
                                close_at_eof=self.close_at_eof)
        return JsonBlock(reader, end_markers=self.formats[marker], fenced=True, initial=self.initial)


class GraniteToolParser(_Wrapped):
    """Granite 3.x: a JSON array after ``<|tool_call|>``."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"<|tool_call|>": (), "<tool_call>": ("</tool_call>",)}
    start_markers = tuple(formats)
    end_markers = ("</tool_call>",)
    drop_markers = ("<|end_of_text|>",)


class Granite20bFcToolParser(_Wrapped):
    """Granite 20B function-calling: ``<function_call>`` before each JSON call."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"<function_call>": ()}
    start_markers = tuple(formats)
    drop_markers = ("<|endoftext|>",)
    array = False


class Phi4MiniJsonToolParser(_Wrapped):
    """Phi-4-mini / FireFunction v2: ``functools[...]``."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"functools[": ()}
    start_markers = tuple(formats)
    drop_markers = ("<|end|>",)
    single = False
    initial = "["


class XlamToolParser(FenceMarkerHold, _Wrapped):
    """xLAM-2: the message is a JSON call array (possibly fenced or after a marker).

    As in vLLM, a ```` ```json ```` fence after text holds the calls too (the text stays
    content), while a bare array after text is prose, unless it follows a think block
    (``<think>...</think>[...]``, which reaches this parser when no reasoning parser runs).
    """

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"[TOOL_CALLS]": (), "<tool_call>": ("</tool_call>",)}
    start_markers = (*formats, "```json", "</think>")
    end_markers = ("</tool_call>",)
    keys = CallKeys(require_args=True)

    def _on_marker(self, marker: str) -> None:
        if marker == "</think>":
            # The close tag stays content; the call array may follow it.
            self.emit_content(marker)
            self._at_call_pos = True
            return
        super()._on_marker(marker)

    def open_block(self, marker: str) -> Block | None:
        if marker != "```json":
            return super().open_block(marker)
        if not self._line_blank:
            return None  # mid-line it is no fence: the marker stays text, as for the engine
        return fenced_call_block(self.sink, self._fenced_calls, lambda body: body.lstrip()[:1] in ("[", "{"),
                                 lambda body: body.lstrip()[:1] in ("", "[", "{"))

    def _fenced_calls(self, body: str) -> list[RawCall] | None:
        return json_body_calls(body, self.keys)

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        if text[0] in "[{" or text.startswith("```"):
            reader = CallListReader(self.sink, self.keys)
            return JsonBlock(reader, fenced=True)
        return NEED_MORE if text[0] == "`" and len(text) < 3 and not eof else None


class HunyuanA13bToolParser(_Wrapped):
    """Hunyuan-A13B: ``<tool_calls>[...]</tool_calls>``."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"<tool_calls>": ("</tool_calls>",)}
    start_markers = tuple(formats)
    end_markers = ("</tool_calls>",)


class JambaToolParser(HunyuanA13bToolParser):
    """Jamba: ``<tool_calls>[...]</tool_calls>``."""


class InternLmToolParser(_Wrapped):
    """InternLM 2.5 / Intern-S1 plugin actions (``<|interpreter|>`` is code, not a call)."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"<|action_start|><|plugin|>": ("<|action_end|>",)}
    start_markers = tuple(formats)
    end_markers = ("<|action_end|>",)
    drop_markers = ("<|im_end|>",)
    array = False


class ApertusToolParser(_Wrapped):
    """Apertus: ``[{"get_weather": {"city": "x"}}]`` between tools prefix and suffix."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"<|tools_prefix|>": ("<|tools_suffix|>",)}
    start_markers = tuple(formats)
    end_markers = ("<|tools_suffix|>",)
    keys = CallKeys(name_is_key=True)
    close_at_eof = True  # vLLM completes ``[{"f": {"a": 1}}`` cut off before ``}]``


class GigaChat3ToolParser(_Wrapped):
    """GigaChat 3: one JSON call after ``function call<|role_sep|>``; an object without
    ``arguments`` is no call (SGLang's GigaChat3 detector)."""

    formats: ClassVar[dict[str, tuple[str, ...]]] = {"function call<|role_sep|>": (), "<|function_call|>": ()}
    start_markers = tuple(formats)
    drop_markers = ("<|message_sep|>", "</s>")
    array = False
    keys = CallKeys(require_args=True)
