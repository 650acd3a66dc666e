"""``auto``: find the format from the output itself (the last detection resort).

Locks on the first decisive marker in content and hands all later text to that
family's parser.  ``<tool_call>`` and ``<tool_calls>`` are shared by several families,
so the body decides: ``{``/``[`` -> Hermes JSON, ``<function=`` -> Qwen3-Coder, a bare
name -> GLM; ``[`` -> Jamba, ``{`` -> MiniMax-M1, ``<tool_call>`` -> Hunyuan v3.
Unmarked calls (a whole message of JSON, ``[f(x=1)]``) count only when tools were sent
and the names are offered, since prose JSON must not become a call.
"""

from __future__ import annotations

import re

from ..base import NotACallError
from ..block import NEED_MORE, Block
from ..engine import ToolStream
from ..registry import load_tool_parser

__all__ = ["AutoToolParser"]

_DIRECT = {
    "<minimax:tool_call>": "minimax_m2",
    "<｜DSML｜function_calls>": "deepseek_v32",
    "<｜DSML｜tool_calls>": "deepseek_v4",
    "<｜tool▁calls▁begin｜>": "deepseek_v3",
    "<｜tool▁call▁begin｜>": "deepseek_v3",
    "<|tool_calls_section_begin|>": "kimi_k2",
    "<|tool_call_section_begin|>": "kimi_k2",
    "<|tool_call_begin|>": "kimi_k2",
    "<seed:tool_call>": "seed_oss",
    "<longcat_tool_call>": "longcat",
    "<|tool_call>": "gemma4",
    "<start_function_call>": "functiongemma",
    "[TOOL_CALLS]": "mistral",
    "<|python_start|>": "llama4_pythonic",
    "<|python_tag|>": "llama3_json",
    "<|tool_call_start|>": "lfm2",
    "functools[": "phi4_mini_json",
    "<|tool_call|>": "granite",
    "<|action_start|><|plugin|>": "internlm",
    "<|tools_prefix|>": "apertus",
    "<function_calls>": "olmo3",
    "<｜tool_calls_begin｜>": "step3",
    "<｜tool_call_begin｜>": "step3",
    "<function_call>": "granite-20b-fc",
    "function call<|role_sep|>": "gigachat3",
    "<function=": "qwen3_coder",
    "<|channel|>": "openai",
}
_BY_BODY = {
    "<tool_call>": (("{", "hermes"), ("[", "hermes"), ("```", "hermes"), ("<function=", "qwen3_coder")),
    "<tool_calls>": (("[", "jamba"), ("{", "minimax"), ("<tool_call>", "hy_v3")),
}
_GLM_NAME = re.compile(r"[\w.\-]+\s*")
_GLM_NEXT = ("<arg_key>", "</tool_call>")
_PY_LIST = re.compile(r"\[\s*([A-Za-z_][\w.\-]*)\s*\(")
_PY_PREFIX = re.compile(r"\[\s*(?:[A-Za-z_][\w.\-]{0,63}\s*)?\Z")


class _HarmonyStream:
    """Adapts the whole-stream harmony parser to the tool-stream interface."""

    def __init__(self, sink) -> None:
        self._parser = load_tool_parser("openai")(sink, parse_tools=True)

    def feed(self, text: str) -> None:
        self._parser.push(text)

    def finish(self) -> None:
        self._parser.close()


class _SwitchBlock(Block):
    """Holds the marker's body until the family is known, then hands over."""

    def __init__(self, auto: AutoToolParser, marker: str) -> None:
        self._auto, self._marker, self._buf = auto, marker, ""

    def feed(self, text: str) -> int | None:
        self._buf += text
        family = self._auto.choose(self._marker, self._buf, eof=False)
        if family is NEED_MORE:
            return None
        self._switch(family)
        return len(text)

    def close(self) -> bool:
        self._switch(self._auto.choose(self._marker, self._buf, eof=True))
        return True

    def _switch(self, family: object) -> None:
        if not isinstance(family, str):
            raise NotACallError("marker without a recognisable body")
        self._auto.switch(family, self._marker + self._buf)


class AutoToolParser(ToolStream):
    """Sniffs the first decisive marker and becomes that family's parser."""

    start_markers = tuple(_DIRECT) + tuple(_BY_BODY)
    drop_markers = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<｜end▁of▁sentence｜>")
    bare_calls = True

    def open_block(self, marker: str) -> Block | None:
        return _SwitchBlock(self, marker)

    def leading_block(self, text: str, eof: bool) -> Block | object | None:
        m = _PY_LIST.match(text)
        if m and m.group(1) in self.tools.names:
            return _SwitchBlock(self, "")
        return NEED_MORE if not eof and _PY_PREFIX.match(text) else None

    def choose(self, marker: str, body: str, eof: bool) -> str | object | None:
        """The family for a marker and the start of its body."""
        if not marker:
            return "pythonic"
        if marker in _DIRECT:
            return _DIRECT[marker]
        head = body.lstrip()
        for prefix, family in _BY_BODY[marker]:
            if head.startswith(prefix):
                return family
        undecided = not head or any(p.startswith(head) for p, _ in _BY_BODY[marker])
        m = _GLM_NAME.match(head) if marker == "<tool_call>" else None
        if m:
            rest = head[m.end() :]
            if "\n" in m.group() or rest.startswith(_GLM_NEXT):
                return "glm47"
            undecided = undecided or (any(t.startswith(rest) for t in _GLM_NEXT) and len(head) < 128)
        return NEED_MORE if undecided and not eof else None

    def switch(self, family: str, text: str) -> None:
        """Become ``family``: every later chunk goes to its parser."""
        stream = _HarmonyStream(self.sink) if family == "openai" else load_tool_parser(family)(self.sink)
        self.hand_over(stream, text)
