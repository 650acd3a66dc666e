"""run_with_deadline stops runaway Python in its thread, and leaves nothing armed behind."""

from __future__ import annotations

import threading
import time

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from router.turn.deadline import TimedOut, run_with_deadline


def in_a_thread(fn):
    result: dict = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # the test inspects whatever came out
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    return result


def test_a_nested_jinja_loop_is_stopped_at_the_deadline():
    template = ImmutableSandboxedEnvironment().from_string(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ i * j }}{% endfor %}{% endfor %}")
    started = time.monotonic()
    result = in_a_thread(lambda: run_with_deadline(template.render, 0.5))
    assert isinstance(result.get("error"), TimedOut)
    assert time.monotonic() - started < 10  # rendering all of it would take hours


def test_fast_work_returns_and_errors_pass_through():
    assert in_a_thread(lambda: run_with_deadline(lambda: 41 + 1, 5))["value"] == 42
    assert isinstance(in_a_thread(lambda: run_with_deadline(lambda: 1 / 0, 5))["error"], ZeroDivisionError)


def test_nothing_lands_after_the_function_returned():
    """A deadline shorter than the thread's later life must not fire into that later work."""

    def later_work():
        run_with_deadline(lambda: None, 0.05)
        time.sleep(0.3)  # long past the deadline: an exception armed for it would land here
        return "clean"

    assert in_a_thread(later_work)["value"] == "clean"


def test_the_deadline_is_per_call():
    with pytest.raises(TimedOut):
        run_with_deadline(lambda: [None for _ in iter(int, 1)], 0.2)  # an endless loop, stopped
    assert run_with_deadline(lambda: "next", 1) == "next"
