"""Call blocks: the per-call state machines the tool engine feeds after a start marker.

A block consumes text until its call(s) are complete and reports how much of the last
chunk it used; it raises ``NotACallError`` when the text turns out not to be a call.
This module holds the block protocol plus the two generic blocks: ``BufferedBlock``
(collect up to an end marker whose body parses) and ``SniffBlock`` (look at the first
characters of the body, then hand over to the block that fits).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING

from .base import NotACallError, RawCall

if TYPE_CHECKING:
    from .sink import EventSink

logger = logging.getLogger(__name__)

__all__ = ["NEED_MORE", "Block", "BufferedBlock", "QuotedThinkBlock", "SniffBlock", "find_first", "partial_suffix_len"]

NEED_MORE = object()
"""Sentinel: not enough text yet to decide."""


def find_first(text: str, markers: Sequence[str], start: int = 0) -> tuple[int, str]:
    """Earliest occurrence of any marker at or after ``start``.

    Returns:
        ``(index, marker)``, or ``(-1, "")`` when none occurs.
    """
    best, found = -1, ""
    for marker in markers:
        idx = text.find(marker, start)
        if idx >= 0 and (best < 0 or idx < best or (idx == best and len(marker) > len(found))):
            best, found = idx, marker
    return best, found


@cache
def _prefixes(markers: tuple[str, ...]) -> tuple[frozenset[str], int, frozenset[str]]:
    proper = frozenset(m[:i] for m in markers for i in range(1, len(m)))
    return proper, max(map(len, markers), default=0), frozenset(m[0] for m in markers if m)


def partial_suffix_len(buf: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of a marker.

    That suffix must be held back: the next chunk may complete the marker.  Costs
    O(longest marker) per call, independent of ``len(buf)``.
    """
    proper, longest, firsts = _prefixes(markers)
    for i in range(max(0, len(buf) - longest + 1), len(buf)):
        if buf[i] in firsts and buf[i:] in proper:
            return len(buf) - i
    return 0


class Block:
    """One call block after its start marker.

    Attributes:
        committed: Characters of block input up to the end of the last call already
            emitted; on rejection only the text after it goes back to content.
    """

    committed = 0
    malformed = False
    """Set with a completed ``feed``: the block's extent is known but it held no valid
    call, so the engine returns its text as content."""
    leftover = ""
    """After a successful ``close``: text at the end that is not part of the block."""

    def feed(self, text: str) -> int | None:
        """Consume text.

        Returns:
            None while the block is still open (all of ``text`` consumed); otherwise
            the number of characters of ``text`` the block used (negative: the block
            ended inside text fed earlier, and gives that much back).

        Raises:
            NotACallError: The text is not a call; the engine turns it into content.
        """
        raise NotImplementedError

    def close(self) -> bool:
        """End of output: emit what is complete.

        Returns:
            True if every started call could be completed.
        """
        raise NotImplementedError


_PLAUSIBLE_HEAD = 512

ParseFn = Callable[[str, bool], "list[RawCall] | None"]
"""``parse(body, final)`` -> calls, or None when the body is not (yet) a valid block."""


class BufferedBlock(Block):
    """Collects text up to the first end marker whose body parses, then emits the calls.

    An end marker whose body does not parse is taken as part of a value (a closing tag
    inside an argument) and the search goes on.  Suits formats whose arguments are not
    worth streaming or cannot be typed before the value ends.
    """

    def __init__(
        self,
        sink: EventSink,
        end_markers: Sequence[str],
        parse: ParseFn,
        *,
        plausible: Callable[[str], bool] | None = None,
        initial: str = "",
        strict: bool = False,
    ) -> None:
        """Create the block.

        Args:
            sink: Where calls go.
            end_markers: Markers that may close the block.
            parse: Parses a body into calls.
            plausible: Quick check on the text so far; False rejects the block early.
            initial: Text that belongs to the body but was consumed as the start marker.
            strict: The first end marker closes the block even if the body does not
                parse (the block is then ``malformed``).
        """
        self._sink = sink
        self._ends = tuple(end_markers)
        self._parse = parse
        self._plausible = plausible
        self._strict = strict
        # The body is kept as parts (joined only when an end marker is tried) so that a
        # long block costs O(new text) per chunk; ``_carry`` is the tail a marker split
        # across chunks may start in.
        self._parts = [initial] if initial else []
        self._size = len(initial)
        self._keep = max(map(len, self._ends), default=1) - 1
        self._carry = initial[max(0, len(initial) - self._keep) :] if self._keep else ""
        self._next = 0  # candidates before this position were already tried

    def _body(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def feed(self, text: str) -> int | None:
        before = self._size
        window_start = before - len(self._carry)
        window = self._carry + text
        self._parts.append(text)
        self._size += len(text)
        pos = max(0, self._next - window_start)
        while True:
            idx, marker = find_first(window, self._ends, pos)
            if idx < 0:
                break
            at = window_start + idx
            self._next, pos = at + 1, idx + 1
            calls = self._parse(self._body()[:at], False)
            if calls is not None or self._strict:
                if calls is None:
                    self.malformed = True
                else:
                    self._emit(calls)
                return at + len(marker) - before
        self._carry = window[max(0, len(window) - self._keep) :] if self._keep else ""
        self._next = max(self._next, self._size - self._keep)
        # Plausibility is about how the body starts: only the head is worth checking.
        if self._plausible is not None and self._size <= _PLAUSIBLE_HEAD and not self._plausible(self._body()):
            raise NotACallError("implausible block body")
        return None

    def close(self) -> bool:
        calls = self._parse(self._body(), True)
        if calls is None:
            return False
        self._emit(calls)
        return True

    def _emit(self, calls: list[RawCall]) -> None:
        for call in calls:
            self._sink.call(call)


def _no_calls(body: str, final: bool) -> None:
    return None


class QuotedThinkBlock(BufferedBlock):
    """A closed think block met in content (no reasoning parser ran): its text stays
    content and the calls written inside it are not calls (MiniMax-M1, Seed-OSS)."""

    def __init__(self, sink: EventSink, close_tag: str) -> None:
        super().__init__(sink, (close_tag,), _no_calls, strict=True)

    def close(self) -> bool:
        # Never closed: not a think block after all, so its text is scanned as content.
        raise NotACallError("unclosed think block")


Chooser = Callable[[str, bool], "Block | object | None"]
"""``choose(text_so_far, eof)`` -> a block, None (not a call) or ``NEED_MORE``."""


class SniffBlock(Block):
    """Buffers the start of a body until ``choose`` picks the block that parses it."""

    def __init__(self, choose: Chooser) -> None:
        self._choose = choose
        self._buf = ""
        self._tail = ""
        self._inner: Block | None = None

    @property
    def committed(self) -> int:  # type: ignore[override]
        return self._inner.committed if self._inner is not None else 0

    def feed(self, text: str) -> int | None:
        if self._inner is not None:
            return self._inner.feed(text)
        self._buf += text
        choice = self._choose(self._buf, False)
        if choice is NEED_MORE:
            return None
        return self._hand_over(choice, len(text))

    @property
    def malformed(self) -> bool:  # type: ignore[override]
        return self._inner is not None and self._inner.malformed

    @property
    def leftover(self) -> str:  # type: ignore[override]
        if self._inner is not None and self._inner.leftover:
            return self._inner.leftover
        return self._tail

    def close(self) -> bool:
        if self._inner is None:
            choice = self._choose(self._buf, True)
            if not isinstance(choice, Block):
                return False
            self._inner = choice
            buf, self._buf = self._buf, ""
            used = choice.feed(buf)
            if used is not None:
                self._tail = buf[used:]
                return True
        return self._inner.close()

    def _hand_over(self, choice: object, fresh: int) -> int | None:
        if not isinstance(choice, Block):
            raise NotACallError("unrecognised block body")
        self._inner = choice
        buf, self._buf = self._buf, ""
        used = choice.feed(buf)
        if used is None:
            return None
        return used - (len(buf) - fresh)
