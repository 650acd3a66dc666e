"""Stop strings over any chunking of the text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from router.turn.stops import StopStringMatcher


def run(chunks: list[str], stops: list[str]) -> tuple[str, bool]:
    matcher = StopStringMatcher(stops)
    out = []
    for chunk in chunks:
        text, matched = matcher.feed(chunk)
        out.append(text)
        if matched:
            return "".join(out), True
    rest, matched = matcher.flush()
    return "".join(out) + rest, matched


def reference(text: str, stops: list[str]) -> tuple[str, bool]:
    hits = [text.find(s) for s in stops if s and s in text]
    return (text[: min(hits)], True) if hits else (text, False)


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


@settings(max_examples=300)
@given(st.text(alphabet="abc<>/", max_size=40), st.lists(st.text(alphabet="abc<>/", min_size=1, max_size=4), max_size=3), st.lists(st.integers(0, 50), max_size=10))
def test_any_chunking_equals_the_whole_text_rule(text, stops, cuts):
    assert run(split(text, cuts), stops) == reference(text, stops)


def test_partial_stop_is_held_back_until_it_cannot_match():
    matcher = StopStringMatcher(["</end>"])
    assert matcher.feed("hello </e") == ("hello ", False)
    assert matcher.feed("xtra") == ("</extra", False)
    assert matcher.feed(" done </en") == (" done ", False)
    assert matcher.feed("d> tail") == ("", True)
    assert matcher.matched == "</end>"


def test_an_earlier_longer_stop_wins_over_a_later_shorter_one():
    matcher = StopStringMatcher(["c", "<c<"])
    assert matcher.feed("<<c") == ("<", False)  # "<c" may still become "<c<", which starts earlier
    assert matcher.feed("<") == ("", True) and matcher.matched == "<c<"


def test_flush_applies_a_held_back_match():
    matcher = StopStringMatcher(["c", "<c<"])
    assert matcher.feed("a<c") == ("a", False)
    assert matcher.flush() == ("<", True) and matcher.matched == "c"


def test_no_stops_passes_text_through():
    assert StopStringMatcher([]).feed("abc") == ("abc", False)
