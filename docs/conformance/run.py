"""Runs the conformance cases (cases/*.json) through our parsers and scores them.

Each case is one model output from a reference engine's unit test with the result that
test asserts.  A case passes when the whole-output parse and the one-character-at-a-time
stream both agree with every assertion it records.  Marked cases (engines contradict each
other, or our documented decision differs) are run and reported but counted apart.

    python docs/conformance/run.py [--family F] [--kind tool|reasoning] [--source S] [-v]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from parsers import parse_output, stream_output  # noqa: E402

CASES_DIR = Path(__file__).parent / "cases"


def load_cases() -> list[dict[str, Any]]:
    """Every case of every file, with the file's stem recorded as ``file``."""
    cases = []
    for path in sorted(CASES_DIR.glob("*.json")):
        for case in json.loads(path.read_text()):
            case["file"] = path.stem
            cases.append(case)
    return cases


def _text(value: str | None) -> str:
    # Our contract trims content and reasoning at both ends and reports absence as "" /
    # None; the engines' tests assert None or "" for "nothing", so both compare as "".
    return (value or "").strip()


def _parse(case: dict[str, Any], streamed: bool) -> dict[str, Any]:
    options = {"tool_parser": case.get("tool_parser"), "reasoning_parser": case.get("reasoning_parser"),
               "tools": case.get("tools"), "thinking_forced_open": case.get("forced_open", False)}
    if streamed:
        return stream_output(list(case["text"]), **options)
    return parse_output(case["text"], **options)


def _check_calls(expect: dict[str, Any], calls: list[dict[str, Any]]) -> list[str]:
    problems = []
    if "call_count" in expect and len(calls) != expect["call_count"]:
        problems.append(f"{len(calls)} calls, want {expect['call_count']}")
    if "min_calls" in expect and len(calls) < expect["min_calls"]:
        problems.append(f"{len(calls)} calls, want at least {expect['min_calls']}")
    if "first_call" in expect:  # the test checks only the first call, however many follow
        if not calls:
            return [*problems, "no calls, want a first call"]
        calls, want = calls[:1], [expect["first_call"]]
    elif "calls" not in expect:
        return problems
    else:
        want = expect["calls"]
    if len(calls) != len(want):
        got = [c["name"] for c in calls]
        return [*problems, f"calls {got}, want {[w['name'] for w in want]}"]
    for index, (got, wanted) in enumerate(zip(calls, want, strict=True)):
        if "name" in wanted and got["name"] != wanted["name"]:
            problems.append(f"call {index} name {got['name']!r}, want {wanted['name']!r}")
        if "arguments" in wanted and got["arguments"] != wanted["arguments"]:
            problems.append(f"call {index} arguments {got['arguments']!r}, want {wanted['arguments']!r}")
        for key, value in wanted.get("arguments_subset", {}).items():
            if got["arguments"].get(key, KeyError) != value:
                problems.append(f"call {index} argument {key}={got['arguments'].get(key)!r}, want {value!r}")
        for key, type_name in wanted.get("argument_types", {}).items():
            if type(got["arguments"].get(key, KeyError)).__name__ != type_name:
                problems.append(f"call {index} argument {key} is {type(got['arguments'].get(key)).__name__}, want {type_name}")
        if wanted.get("arguments_nonempty") and not got["arguments"]:
            problems.append(f"call {index} has no arguments")
        if "id" in wanted and got["id"] != wanted["id"]:
            problems.append(f"call {index} id {got['id']!r}, want {wanted['id']!r}")
    return problems


def check(case: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """What the result gets wrong against the case's assertions (empty when it passes)."""
    expect = case["expect"]
    problems = _check_calls(expect, result["tool_calls"])
    for field in ("content", "reasoning"):
        if field in expect and _text(result[field]) != _text(expect[field]):
            problems.append(f"{field} {_text(result[field])!r}, want {_text(expect[field])!r}")
    for needle in expect.get("content_contains", []):
        if needle not in (result["content"] or ""):
            problems.append(f"content lacks {needle!r}")
    for needle in expect.get("content_excludes", []):
        if needle in (result["content"] or ""):
            problems.append(f"content holds {needle!r}")
    return problems


def run_case(case: dict[str, Any]) -> list[str]:
    """Problems of the whole parse and of the character stream, each prefixed by its mode."""
    problems = []
    for mode, streamed in (("whole", False), ("stream", True)):
        try:
            result = _parse(case, streamed)
        except Exception as error:  # a raise is a failure of the case, reported with the rest
            problems.append(f"{mode}: raised {type(error).__name__}: {error}")
            continue
        problems.extend(f"{mode}: {p}" for p in check(case, result))
    return problems


def _pct(passed: int, total: int) -> str:
    return f"{passed}/{total} ({100 * passed / total:.1f}%)" if total else "0/0"


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--family", help="only cases of this engine parser name")
    options.add_argument("--kind", choices=("tool", "reasoning"))
    options.add_argument("--source", help="only cases whose file name starts with this (vllm, sglang, ...)")
    options.add_argument("-v", "--verbose", action="store_true", help="print marked failures in full too")
    args = options.parse_args(argv)
    cases = [c for c in load_cases()
             if (not args.family or c["family"] == args.family) and (not args.kind or c["kind"] == args.kind)
             and (not args.source or c["file"].startswith(args.source))]
    ids = [c["id"] for c in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        print(f"duplicate case ids: {sorted(duplicates)}")
        return 2
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # passed, total, unmarked passed/total
    failures = []
    for case in cases:
        problems = run_case(case)
        marked = bool(case.get("marked"))
        for key in (f"{case['kind']}:{case['family']}", "ALL", f"ALL {case['kind']}"):
            row = tally[key]
            row[0] += not problems
            row[1] += 1
            if not marked:
                row[2] += not problems
                row[3] += 1
        if problems:
            failures.append((case, problems))
    width = max((len(k) for k in tally), default=10)
    print(f"{'family':<{width}}  {'passed':>18}  {'unmarked passed':>18}")
    for key in sorted(k for k in tally if not k.startswith("ALL")) + sorted(k for k in tally if k.startswith("ALL")):
        passed, total, upassed, utotal = tally[key]
        print(f"{key:<{width}}  {_pct(passed, total):>18}  {_pct(upassed, utotal):>18}")
    if failures:
        print("\nfailures:")
    for case, problems in failures:
        mark = f"  [marked: {case['marked']}]" if case.get("marked") else ""
        print(f"- {case['id']}{mark}")
        if not case.get("marked") or args.verbose:
            for problem in problems[:4]:
                print(f"    {problem}")
    return 0 if all(c.get("marked") for c, _ in failures) else 1


if __name__ == "__main__":
    sys.exit(main())
