"""Bounding how long a piece of Python code may run in a worker thread.

A chat template is a program: Jinja loops can run for hours, and a thread cannot be killed.
CPython can raise an exception in another thread at its next bytecode boundary
(``PyThreadState_SetAsyncExc``), which stops a runaway template wherever it is in pure
Python (Jinja's compiled code is). Work inside one long C call (a regex, a huge string
operation) is stopped only when that call returns.

The exception is armed only while the function runs: a lock orders the timer's "raise now"
against the thread's "I am done", and a pending exception that did not land is cleared
before the thread goes back to its pool.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DeadlineExceeded(BaseException):
    """Raised inside the running function at its deadline.

    A BaseException, so that code under it which catches ``Exception`` (Jinja, transformers)
    cannot swallow it.
    """


class TimedOut(Exception):
    """``run_with_deadline``'s function did not finish in time."""


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


def run_with_deadline(fn: Callable[[], T], timeout_s: float) -> T:
    """Call ``fn`` in this thread; stop it with ``TimedOut`` if it runs past ``timeout_s``.

    Meant for a worker thread (``anyio.to_thread.run_sync``), never the event loop's.

    Raises:
        TimedOut: ``fn`` was still running at the deadline.
    """
    thread_id = threading.get_ident()
    lock = threading.Lock()
    running = True

    def interrupt() -> None:
        with lock:
            if running:
                _set_async_exc(thread_id, DeadlineExceeded)

    timer = threading.Timer(timeout_s, interrupt)
    timer.daemon = True
    try:
        timer.start()
        try:
            return fn()
        finally:
            with lock:
                running = False
                _set_async_exc(thread_id, None)  # one armed but not yet delivered must not land later
            timer.cancel()
    except DeadlineExceeded:
        raise TimedOut(f"did not finish in {timeout_s:g}s") from None
