"""Stop strings over streamed text: the same cut, whatever the chunking.

The rule is the whole-text one: the output ends right before the earliest occurrence of any
stop string. Streaming holds back the tail that could still become such an occurrence.
"""

from __future__ import annotations


class StopStringMatcher:
    """Feed text as it is decoded; emit only what no stop string can still claim."""

    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._buffer = ""
        self.matched: str | None = None  # the stop string that ended the text, once one did

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to emit, whether a stop string ended the output)."""
        if not self._stops:
            return text, False
        self._buffer += text
        hit = self._earliest_full_match()
        start_of_partial = self._earliest_partial_start(before=hit[0] if hit else len(self._buffer))
        if hit is not None and start_of_partial is None:
            return self._cut(hit), True
        keep_from = start_of_partial if start_of_partial is not None else len(self._buffer)
        emitted, self._buffer = self._buffer[:keep_from], self._buffer[keep_from:]
        return emitted, False

    def flush(self) -> tuple[str, bool]:
        """End of output: a held-back full match still cuts; anything else is plain text."""
        hit = self._earliest_full_match()
        if hit is not None:
            return self._cut(hit), True
        rest, self._buffer = self._buffer, ""
        return rest, False

    def _cut(self, hit: tuple[int, str]) -> str:
        position, self.matched = hit
        emitted, self._buffer = self._buffer[:position], ""
        return emitted

    def _earliest_full_match(self) -> tuple[int, str] | None:
        hits = [(i, stop) for stop in self._stops if (i := self._buffer.find(stop)) >= 0]
        return min(hits) if hits else None

    def _earliest_partial_start(self, before: int) -> int | None:
        """The first position < ``before`` from which the buffer's tail is a proper prefix of a stop."""
        for start in range(max(0, len(self._buffer) - max(map(len, self._stops)) + 1), min(before, len(self._buffer))):
            tail = self._buffer[start:]
            if any(len(tail) < len(stop) and stop.startswith(tail) for stop in self._stops):
                return start
        return None
