"""Recent responses kept in memory for ``previous_response_id`` (bounded, oldest dropped)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

DEFAULT_CAPACITY = 512


class ResponseStore:
    """response id → the chat messages of its whole conversation (input plus output)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._conversations: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def put(self, response_id: str, messages: list[dict[str, Any]]) -> None:
        self._conversations[response_id] = messages
        self._conversations.move_to_end(response_id)
        while len(self._conversations) > self._capacity:
            self._conversations.popitem(last=False)

    def get(self, response_id: str) -> list[dict[str, Any]] | None:
        messages = self._conversations.get(response_id)
        if messages is not None:
            self._conversations.move_to_end(response_id)
        return messages
