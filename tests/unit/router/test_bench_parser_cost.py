"""``rapid-mlx bench parsers --against``: another checkout's parsers timed on the same texts."""

from __future__ import annotations

import shutil
from pathlib import Path

from router.bench.parser_cost import FAMILIES, against_report, checkout_costs

HERE = Path(__file__).resolve().parents[3]


def test_a_checkout_is_timed_with_its_own_parsers(tmp_path):
    # A copy of this checkout's parsers without one family stands in for an older commit.
    other = tmp_path / "older"
    shutil.copytree(HERE / "parsers", other / "parsers", ignore=shutil.ignore_patterns("__pycache__"))
    registry = other / "parsers" / "registry.py"
    registry.write_text(registry.read_text().replace('"cohere_command3": _T', '"cohere_three": _T'))
    costs = checkout_costs(other, repeats=1)
    assert set(costs) == set(FAMILIES)
    assert costs["cohere_command3"] is None and all(v > 0 for k, v in costs.items() if k != "cohere_command3")


def test_the_report_compares_every_family(tmp_path):
    report = against_report(HERE, rounds=2, repeats=1)
    rows = [line for line in report.splitlines() if line.startswith("| ") and not line.startswith("| family")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == list(FAMILIES)
