"""Turn events → Responses output items (reasoning, message, function_call) and their stream events."""

from __future__ import annotations

import json
from typing import Any

from parsers import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart
from router.api.dispatch import new_id

Frame = tuple[str, dict[str, Any]]


class ItemBuilder:
    """One open item at a time, in output_index order; ``apply`` returns that event's frames."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._pending_space = ""

    def apply(self, event) -> list[Frame]:
        if isinstance(event, ReasoningDelta):
            return self._reasoning(event.text)
        if isinstance(event, ContentDelta):
            return self._text(event.text)
        if isinstance(event, ToolCallStart):
            self._pending_space = ""
            item = {"id": new_id("fc_"), "type": "function_call", "call_id": event.id, "name": event.name, "arguments": "", "status": "in_progress"}
            return self._close() + self._add(item)
        if isinstance(event, ToolCallArgsDelta) and self._is_open("function_call"):
            self._open["arguments"] += event.text
            return [("response.function_call_arguments.delta", {"item_id": self._open["id"], "output_index": self._index, "delta": event.text})]
        if isinstance(event, ToolCallEnd) and self._is_open("function_call"):
            self._open["status"] = "completed"
            return self._close()
        return []

    def finish(self) -> list[dict[str, Any]]:
        self._close()
        return self.items

    def close_frames(self) -> list[Frame]:
        return self._close()

    def as_messages(self) -> list[dict[str, Any]]:
        """The output as chat messages, for previous_response_id follow-ups."""
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        for item in self.items:
            if item["type"] == "reasoning":
                message["reasoning_content"] = item["content"][0]["text"]
            elif item["type"] == "message":
                message["content"] += item["content"][0]["text"]
            elif item["type"] == "function_call":
                message.setdefault("tool_calls", []).append(
                    {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": item["arguments"] or "{}"}})
        return [message]

    # ------------------------------------------------------------------ internal

    @property
    def _index(self) -> int:
        return len(self.items) - 1

    def _is_open(self, kind: str) -> bool:
        return self._open is not None and self._open["type"] == kind

    def _add(self, item: dict[str, Any]) -> list[Frame]:
        self._open = item
        self.items.append(item)
        return [("response.output_item.added", {"output_index": self._index, "item": _snapshot(item)})]

    def _reasoning(self, text: str) -> list[Frame]:
        frames: list[Frame] = []
        if not self._is_open("reasoning"):
            frames += self._close()
            frames += self._add({"id": new_id("rs_"), "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": ""}]})
        self._open["content"][0]["text"] += text
        frames.append(("response.reasoning_text.delta", {"item_id": self._open["id"], "output_index": self._index, "content_index": 0, "delta": text}))
        return frames

    def _text(self, text: str) -> list[Frame]:
        frames: list[Frame] = []
        if not self._is_open("message"):
            if not text.strip():
                self._pending_space += text
                return []
            text, self._pending_space = self._pending_space.lstrip("\n") + text, ""
            frames += self._close()
            frames += self._add({"id": new_id("msg_"), "type": "message", "role": "assistant", "status": "in_progress",
                                 "content": [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}]})
            frames.append(("response.content_part.added", {"item_id": self._open["id"], "output_index": self._index, "content_index": 0,
                                                           "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}))
        self._open["content"][0]["text"] += text
        frames.append(("response.output_text.delta", {"item_id": self._open["id"], "output_index": self._index, "content_index": 0,
                                                       "delta": text, "logprobs": []}))
        return frames

    def _close(self) -> list[Frame]:
        item, self._open = self._open, None
        if item is None:
            return []
        where = {"item_id": item["id"], "output_index": self._index}
        frames: list[Frame] = []
        if item["type"] == "message":
            part = item["content"][0]
            frames.append(("response.output_text.done", {**where, "content_index": 0, "text": part["text"], "logprobs": []}))
            frames.append(("response.content_part.done", {**where, "content_index": 0, "part": dict(part)}))
        elif item["type"] == "reasoning":
            frames.append(("response.reasoning_text.done", {**where, "content_index": 0, "text": item["content"][0]["text"]}))
        elif item["type"] == "function_call":
            # Closed without its ToolCallEnd: the output was cut off inside the call.
            if item["status"] != "completed":
                item["status"] = "incomplete"
            item["arguments"] = item["arguments"] or "{}"
            frames.append(("response.function_call_arguments.done", {**where, "name": item["name"], "arguments": item["arguments"]}))
        if item["type"] != "function_call":
            item["status"] = "completed"
        frames.append(("response.output_item.done", {"output_index": self._index, "item": _snapshot(item)}))
        return frames


def _snapshot(item: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(item))
