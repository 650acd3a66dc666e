"""``rapid-mlx bench tools-scripted``: every family's scripted outputs through the parsers, and a
classification that catches what an agent would trip on."""

from __future__ import annotations

import pytest

from parsers.registry import TOOL_PARSERS
from router.bench.cli import main
from router.bench.client import ToolCall
from router.bench.scripted_tools import PROSE, RENDER, SCRIPTS, Observed, classify, family_outcomes

SCRIPT = {script.name: script for script in SCRIPTS}


def test_every_scripted_family_is_a_registered_parser():
    assert set(RENDER) <= set(TOOL_PARSERS)


@pytest.mark.parametrize("family", sorted(RENDER))
def test_every_script_of_every_family_comes_out_as_written(family):
    results = family_outcomes(family, seeds=2)
    assert {key: dict(counts) for key, counts in results.items() if set(counts) != {"ok"}} == {}


def test_markup_in_content_is_a_leak_and_a_different_call_is_caught():
    call = SCRIPT["call"]
    right = ToolCall("get_weather", '{"city":"Paris","unit":"C"}')
    assert classify(call, Observed(PROSE, [right]), streamed=False) == "ok"
    assert classify(call, Observed(PROSE + " <tool_call>", [right]), streamed=False) == "leaked"
    assert classify(call, Observed(PROSE, [ToolCall("get_weather", '{"city":"Lyon"}')]), streamed=False) == "different"
    assert classify(call, Observed(PROSE, []), streamed=False) == "missing"
    assert classify(call, Observed(PROSE, [ToolCall("get_weather", '{"city":')]), streamed=True) == "unparsed"


def test_a_cut_call_streamed_may_show_its_fragments_but_not_its_markup_again():
    cut = SCRIPT["truncated"]
    fragment = ToolCall("write_file", '{"path":"notes.md","content":"A long')
    assert classify(cut, Observed(PROSE, [fragment]), streamed=True) == "ok"
    assert classify(cut, Observed(PROSE + " <tool_call>{...", [fragment]), streamed=True) == "leaked"
    assert classify(cut, Observed(PROSE, [ToolCall("write_file", '{"path":"other.md"')]), streamed=True) == "different"
    assert classify(cut, Observed(PROSE + " <tool_call>{...", []), streamed=False) == "ok"  # whole: the text is the answer
    assert classify(cut, Observed(PROSE, [fragment]), streamed=False) == "unparsed"


def test_the_command_writes_a_report_and_exits_0_when_all_parse(tmp_path, capsys):
    assert main(["tools-scripted", "--family", "hermes", "--family", "mistral", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "summary.md").read_text()
    assert "| hermes | ok | ok | ok | ok | ok | 0 |" in report and "| mistral |" in report
    assert "50 runs, 0 not ok" in capsys.readouterr().out


def test_an_unknown_family_is_refused():
    with pytest.raises(SystemExit):
        main(["tools-scripted", "--family", "nope"])
