"""A rich progress bar over a run's planned requests (quiet when stderr is not a terminal)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yields ``advance(count)``."""
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not sys.stderr.isatty(), transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda count: progress.advance(task, count)
