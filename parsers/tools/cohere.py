"""Cohere Command A / R7B (``cohere_command3``) and Command 4 (``cohere_command4``) actions.

A turn's calls are one JSON list in an action block; the template numbers the calls and
the model copies that id, which is kept (vLLM does)::

    <|START_ACTION|>[
        {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}},
        {"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}
    ]<|END_ACTION|>

The two versions differ only in the answer wrappers dropped from content
(``<|START_RESPONSE|>`` in Command A, ``<|START_TEXT|>`` in Command 4); the thinking
section and the same wrappers are the reasoning parser's (``parsers.reasoning.cohere``).
Citation tags (``<co>span</co: 0:[1]>``) are removed from the content as Cohere's
``melody`` filter removes them.  Arguments stream as they arrive; a list cut off by the
end of output comes back as content.
"""

from __future__ import annotations

from ..block import Block
from ..engine import ToolStream
from ..jsonblock import JsonBlock
from ..jsoncall import CallKeys, CallListReader
from ..reasoning.cohere import ACTION_TAGS, CitationStripper
from ..sink import EventSink

__all__ = ["CohereCommand3ToolParser", "CohereCommand4ToolParser"]

# The template's keys first; the generic spellings models sometimes fall back to after them.
_KEYS = CallKeys(name=("tool_name", "name"), args=("parameters", "arguments"), ids=("tool_call_id", "id"))


class CohereCommand3ToolParser(ToolStream):
    """Command A / R7B ``<|START_ACTION|>[...]<|END_ACTION|>`` blocks."""

    start_markers = (ACTION_TAGS[0],)
    end_markers = (ACTION_TAGS[1],)
    drop_markers = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|END_OF_TURN_TOKEN|>")
    # An action may follow the plan without <|END_THINKING|>: the control token ends it.
    reasoning_exit_markers = (ACTION_TAGS[0],)

    def __init__(self, sink: EventSink) -> None:
        """Create the per-request state (see ``ToolStream``)."""
        super().__init__(sink)
        self._citations = CitationStripper()

    def open_block(self, marker: str) -> Block | None:
        return JsonBlock(CallListReader(self.sink, _KEYS), end_markers=self.end_markers, fenced=True)

    def emit_content(self, text: str) -> None:
        """Send content on without its citation tags (a tag split across chunks waits)."""
        super().emit_content(self._citations.push(text))

    def finish(self) -> None:
        """End of output: flush blocks, then text the citation filter held back."""
        super().finish()
        super().emit_content(self._citations.flush())


class CohereCommand4ToolParser(CohereCommand3ToolParser):
    """Command 4: the same actions; answers are wrapped in ``<|START_TEXT|>``."""

    drop_markers = ("<|START_TEXT|>", "<|END_TEXT|>", *CohereCommand3ToolParser.drop_markers)
