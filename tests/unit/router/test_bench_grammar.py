"""``rapid-mlx bench grammar`` on the tiny model: both paths run and the report has every row."""

from __future__ import annotations

from router.bench.grammar_cost import measure, report


def test_the_grammar_bench_measures_free_and_constrained_steps():
    described, results, compile_lines = measure(None, "tiny", [1, 2], steps=4, rounds=1)
    text = report(described, results, compile_lines, 4)
    assert [cost.sequences for cost in results] == [1, 2]
    assert all(cost.free_ms[0] > 0 and cost.constrained_ms[0] > 0 for cost in results)
    assert "| compile it, first time (worker) |" in text and "| 2 |" in text
