"""Stop strings over streamed text: emit only what cannot be the start of a stop string."""

from __future__ import annotations


class StopStringMatcher:
    """Holds back the shortest tail that could still grow into a stop string.

    ``feed`` returns the text that is safe to emit and whether a stop string matched; on a
    match the returned text ends right before the stop string, which is never emitted.
    """

    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._buffer = ""
        self.matched: str | None = None  # the stop string that ended the text, once one did

    def feed(self, text: str) -> tuple[str, bool]:
        if not self._stops:
            return text, False
        self._buffer += text
        hits = [(i, stop) for stop in self._stops if (i := self._buffer.find(stop)) >= 0]
        if hits:
            position, self.matched = min(hits)
            emitted, self._buffer = self._buffer[:position], ""
            return emitted, True
        keep = self._held_back_length()
        emitted = self._buffer[: len(self._buffer) - keep]
        self._buffer = self._buffer[len(self._buffer) - keep :]
        return emitted, False

    def flush(self) -> str:
        """End of output: whatever was held back is plain text after all."""
        rest, self._buffer = self._buffer, ""
        return rest

    def _held_back_length(self) -> int:
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(self._buffer)), longest, -1):
                if self._buffer.endswith(stop[:size]):
                    longest = size
                    break
        return longest
