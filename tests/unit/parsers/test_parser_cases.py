"""Runs every family's case list whole, one character at a time and under random splits.

Each case is data (``cases/<family>.py``); the result must match the expectation and be
identical under any chunking, and every event stream must satisfy the streaming
contract (``parsers_harness.check_events``).
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parsers_harness import check_case, expected, normalise, random_chunks, whole

_CASES_DIR = Path(__file__).parent / "cases"


def _load_families() -> dict[str, list[dict]]:
    families = {}
    for path in sorted(_CASES_DIR.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"parser_cases_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        families[path.stem] = module.CASES
    return families


FAMILIES = _load_families()
ALL = [c for cases in FAMILIES.values() for c in cases]
IDS = [c["id"] for c in ALL]


def test_case_ids_unique():
    assert len(IDS) == len(set(IDS))


@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_whole_output(case):
    check_case(case, [case["text"]])
    assert normalise(whole(case), case) == expected(case)


@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_one_char_chunks(case):
    check_case(case, list(case["text"]))


@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_seeded_random_chunks(case):
    for seed in range(6):
        check_case(case, random_chunks(case["text"], random.Random(seed)))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_any_grouping(family):
    """Hypothesis: any split of any case of the family gives the same parse."""
    cases = FAMILIES[family]

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def prop(data):
        case = data.draw(st.sampled_from(cases), label="case")
        cuts = data.draw(st.lists(st.integers(0, len(case["text"])), max_size=24), label="cuts")
        points = sorted(set(cuts))
        chunks = [case["text"][a:b] for a, b in zip([0, *points], [*points, len(case["text"])], strict=True)]
        check_case(case, chunks)

    prop()
