"""Key/value tag calls: GLM-4.5/4.6/4.7, LongCat-Flash and Hunyuan v3.

GLM writes the name, then pairs whose values are raw for strings and JSON otherwise::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

(GLM-4.7 drops the newlines; a zero-argument call is ``<tool_call>name</tool_call>``.)
Values are typed by the tool schema, else parsed as JSON when they are JSON, else kept
as the raw string; a string value the model quoted (``"London"``) loses its quotes.
Drifted bodies mlx-lm's glm47 parser reads are accepted for offered tools: the name then
a JSON object (on the same line or the next) or ``key=value`` pairs (shell quoting).
LongCat uses ``<longcat_tool_call>`` with ``longcat_``-prefixed pair tags or a JSON body;
Hunyuan v3 puts ``<tool_sep>`` after the name inside ``<tool_calls>``.
Calls are emitted whole when their block closes; a block cut off by the end of output
returns as content.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache

from ..base import RawCall
from ..block import Block, BufferedBlock
from ..engine import ToolStream
from ..jsoncall import json_body_calls
from ..schema import ToolSet, coerce_value, lenient_literal

__all__ = ["Glm45ToolParser", "Glm47ToolParser", "HyV3ToolParser", "LongcatToolParser"]

_NAME = re.compile(r"[\w.\-:/]+\Z")
# A once-escaped copy of the template's layout: GLM-4.6 sometimes writes the newlines
# between its tags as the two characters ``\n`` (SGLang's GLM-4 detector accepts them).
_LAYOUT = r"(?:\s|\\n)*"
_TRAILING_ESCAPED_NL = re.compile(r"(?:\\n)+\Z")
_TRAILING_ESCAPED_NL_PART = re.compile(r"(?:\\n)*\\?\Z")  # the same, maybe cut after the backslash
# The first line of a body: a name, maybe followed by ``{json`` or ``key=value`` pairs
# (mlx-lm's lenient forms), or by the start of a key still being written.
_HEAD = re.compile(r"[\w.\-:/]+(?:[ \t]+(?:\{.*|[A-Za-z_][\w.\-]*=.*|[A-Za-z_][\w.\-]*)?)?\Z", re.S)


@cache
def _pair_regex(prefix: str) -> re.Pattern[str]:
    return re.compile(
        rf"{_LAYOUT}<{prefix}arg_key>(?P<key>.*?)</{prefix}arg_key>{_LAYOUT}<{prefix}arg_value>(?P<value>.*?)</{prefix}arg_value>",
        re.S,
    )


def parse_kv_body(body: str, tools: ToolSet, *, prefix: str = "", name_sep: str = "") -> list[RawCall] | None:
    """Parse ``NAME[sep]<arg_key>k</arg_key><arg_value>v</arg_value>...`` (or a JSON body).

    Returns:
        The call, or None when the body is incomplete or not a call.
    """
    text = body.strip()
    if text.startswith("{"):
        return json_body_calls(text)
    key_tag = f"<{prefix}arg_key>"
    cut = text.find(name_sep) if name_sep else text.find(key_tag)
    name = _TRAILING_ESCAPED_NL.sub("", (text if cut < 0 else text[:cut]).strip()).strip()
    if not _NAME.match(name):
        return _plain_text_call(text, tools)
    rest = "" if cut < 0 else text[cut + len(name_sep) :]
    pairs, pos, regex = {}, 0, _pair_regex(prefix)
    while pos < len(rest):
        m = regex.match(rest, pos)
        if not m:
            if rest[pos:].replace("\\n", "").strip():
                return None  # a half-written pair: the end marker sat inside a value
            break
        key = m.group("key").strip()
        if key not in pairs:
            pairs[key] = _typed_value(m.group("value"), tools.property_schema(name, key))
        pos = m.end()
    return [RawCall(name, pairs)]


def _typed_value(raw: str, schema: dict | None) -> object:
    """A pair value typed by its schema; a string written as a JSON literal loses its quotes.

    GLM's template writes string values bare, so ``"London"`` is the model quoting the
    value (SGLang's GLM detectors and mlx-lm's glm47 unquote it; vLLM only when the schema
    type is not spelled ``string``).
    """
    value = coerce_value(raw, schema, "json")
    text = raw.strip()
    if isinstance(value, str) and len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            inner = json.loads(text)
        except ValueError:
            return value
        return inner if isinstance(inner, str) else value
    return value


_PLAIN = re.compile(r"(?P<name>[\w.\-:/]+)[ \t]*\n?[ \t]*(?P<rest>.*)\Z", re.S)
_KV_KEY = re.compile(r"[A-Za-z_][\w.\-]*\Z")


def _plain_text_call(text: str, tools: ToolSet) -> list[RawCall] | None:
    """Drifted bodies mlx-lm's glm47 parser accepts: ``NAME {json}`` or ``NAME k=v k2=v2``.

    Only for an offered tool, and only when every token after the name is ``key=value``,
    so a sentence after the tag stays prose.
    """
    m = _PLAIN.match(text)
    if m is None or not tools.offered(m.group("name")) or not m.group("rest").strip():
        return None
    name, rest = m.group("name"), m.group("rest").strip()
    if rest.startswith("{"):
        try:
            arguments = lenient_literal(rest)
        except ValueError:
            return None
        return [RawCall(name, arguments)] if isinstance(arguments, dict) else None
    try:
        tokens = shlex.split(rest)
    except ValueError:
        return None
    arguments: dict = {}
    for token in tokens:
        key, eq, value = token.partition("=")
        if not eq or not _KV_KEY.match(key):
            return None
        arguments.setdefault(key, coerce_value(value, tools.property_schema(name, key), "json"))
    return [RawCall(name, arguments)] if arguments else None


class Glm45ToolParser(ToolStream):
    """GLM-4.5/4.6 ``<tool_call>NAME<arg_key>..`` blocks (newline layout)."""

    start_markers = ("<tool_call>",)
    end_markers = ("</tool_call>",)
    drop_markers = ("<|observation|>", "<|user|>", "<|endoftext|>")
    pair_prefix = ""
    name_sep = ""

    def open_block(self, marker: str) -> Block | None:
        return BufferedBlock(self.sink, self.end_markers, self._parse, plausible=self._plausible)

    def _parse(self, body: str, final: bool) -> list[RawCall] | None:
        if final or not self._plausible(body):
            return None  # cut off before the close tag (arguments may be missing), or prose
        return parse_kv_body(body, self.tools, prefix=self.pair_prefix, name_sep=self.name_sep)

    def _plausible(self, text: str) -> bool:
        """The body must start with a bare name (or JSON); prose after the tag is not a call.

        The template writes the name right after the tag, so a space there means prose.
        """
        if text[:1] in (" ", "\t"):
            return False
        head = text.lstrip()
        if not head or head.startswith("{"):
            return True
        stop = min((i for i in (head.find("<"), head.find("\n")) if i >= 0), default=len(head))
        first = _TRAILING_ESCAPED_NL_PART.sub("", head[:stop].strip())
        return bool(_HEAD.match(first)) if first else True


class Glm47ToolParser(Glm45ToolParser):
    """GLM-4.7 (and Poolside Laguna): the same tags without newlines."""


class LongcatToolParser(Glm45ToolParser):
    """LongCat-Flash: ``<longcat_tool_call>`` with JSON or ``longcat_``-prefixed pairs."""

    start_markers = ("<longcat_tool_call>",)
    end_markers = ("</longcat_tool_call>",)
    drop_markers = ()
    pair_prefix = "longcat_"


class HyV3ToolParser(Glm45ToolParser):
    """Hunyuan v3: ``<tool_calls><tool_call>NAME<tool_sep><arg_key>..</tool_call></tool_calls>``."""

    drop_markers = ("<tool_calls>", "</tool_calls>")
    name_sep = "<tool_sep>"
