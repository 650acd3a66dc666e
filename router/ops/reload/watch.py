"""The config file watcher: it says when `rapidmlx.toml` may have changed, never what changed.

Editors save in different ways: a write in place, a temp file renamed over the config
(vim, VS Code, atomic writers), a delete and a recreate. The last two replace the file's
inode, so the watch is on the containing directory (not recursive), filtered to the config's
name. The config may be a symlink, or a chain of them (Kubernetes mounts a configmap as
`name -> ..data/name`, with `..data` swapped atomically to a new directory): every
directory on the chain is watched, and the chain is resolved again after every batch of
events and after every quiet second, so a retargeted link moves the watch to the new target.

The callback only triggers the reload, which reads the file itself: the watcher never reports
contents, and a burst of events (truncate + write, temp write + rename) calls it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import watchfiles

logger = logging.getLogger(__name__)
# watchfiles logs "N changes detected" at info for every batch in a watched directory, the
# server's own log file included: noise in an operator's log. Its warnings still show.
logging.getLogger("watchfiles.main").setLevel(logging.WARNING)

# awatch returns a batch at the first `step` (our debounce_ms) that adds no new (change type,
# path) pair to it, and after this long at the latest. A batch is a set: the same file modified
# again adds nothing, so a file rewritten without pause is reported every 2 steps or so; only
# new names (an editor's temp files) extend a batch, up to this cap.
_DEBOUNCE_CAP_MS = 1600
# The watch thread also wakes after this long without events. Each wake-up resolves the chain
# again, which catches what no watched directory reports: a watched directory removed (or
# removed and recreated), a link hop whose directory is not watched yet.
_TICK_MS = 1000
_RETRY_S = 1.0
_MAX_HOPS = 40  # the most symlinks Linux follows in one path lookup

# A directory entry on the config's symlink chain: (real path of its directory, its name).
Entry = tuple[str, str]
# A watched directory's identity (st_dev, st_ino): a directory recreated under the same path
# is a new inode, and the watch on the old one sees nothing more.
DirId = tuple[int, int]


class _StopEvent(asyncio.Event):
    """The stop event handed to awatch: set by the caller's event, or by awatch itself.

    awatch sets its stop event when its task is cancelled, to end the watch thread. Were that
    the caller's event, cancelling the watcher would look like a shutdown to everything else
    waiting on it. ``is_set`` is called from the watch thread, so it only reads flags.
    """

    def __init__(self, outer: asyncio.Event | None) -> None:
        super().__init__()
        self._outer = outer

    def is_set(self) -> bool:
        return super().is_set() or (self._outer is not None and self._outer.is_set())


async def watch_config_file(path: Path, on_change: Callable[[], None], *, debounce_ms: int = 200,
                            stop_event: asyncio.Event | None = None) -> None:
    """Call ``on_change()`` after each burst of changes to ``path``; returns when stop_event is set.

    A burst is grouped by awatch: it ends at the first ``debounce_ms`` that brings no new
    (change type, path) pair, or after 1.6 s, so a save (truncate + write, temp file + rename)
    is one call, about ``debounce_ms`` to twice that after it. A write after a call's batch is
    reported by a later call, so the last call always sees the last write. A change to any
    link on the way to the file counts as a change of the file. When the watch cannot
    be set up (the directory is gone, too many inotify watches), a warning is logged and it is
    retried every second; once it is back, ``on_change`` is called, since changes were missed.
    An exception from ``on_change`` is logged and the watch goes on. Without a stop event it
    runs until cancelled.

    Raises:
        ValueError: ``debounce_ms`` is not positive (awatch would spin).
    """
    if debounce_ms <= 0:
        raise ValueError(f"debounce_ms must be positive, not {debounce_ms}")
    stop = _StopEvent(stop_event)
    entries = _symlink_chain(path)
    # Set when changes may have gone unseen (a failed watch, or a restart on other
    # directories): on_change is called once the new watch is running, so nothing falls between.
    missed = False
    failing = False
    while not stop.is_set():
        dirs = _existing_dirs(entries)
        try:
            if not dirs:
                raise FileNotFoundError(errno.ENOENT, "no such directory", os.path.dirname(os.path.abspath(path)))
            batches = watchfiles.awatch(
                *dirs, watch_filter=None, debounce=max(_DEBOUNCE_CAP_MS, debounce_ms), step=debounce_ms,
                stop_event=stop, rust_timeout=_TICK_MS, yield_on_timeout=True, recursive=False)
            # aclosing: leaving the loop to watch other directories must close this watcher now.
            async with contextlib.aclosing(batches):
                async for changes in batches:
                    if failing:
                        logger.info("watching the config file %s again", path)
                        failing = False
                    new_entries = _symlink_chain(path)
                    changed = missed or new_entries != entries or _touches(changes, entries | new_entries)
                    entries = new_entries
                    if _existing_dirs(entries) != dirs:
                        missed = True
                        break
                    missed = False
                    if changed:
                        _call(on_change)
        except (OSError, RuntimeError) as exc:
            # OSError: a directory is gone, or the inotify limits are reached; RuntimeError is
            # what watchfiles raises for its own failures (WatchfilesRustInternalError).
            # Warn once per outage; the retries would repeat it every second.
            log = logger.debug if failing else logger.warning
            log("cannot watch the config file %s (%s); retrying every second", path, exc)
            failing = missed = True
            await _sleep_unless_stopped(stop_event, _RETRY_S)
            entries = _symlink_chain(path)


def _symlink_chain(path: Path) -> frozenset[Entry]:
    """The entries whose change can change what reading ``path`` gives: it, and each link target."""
    entries: set[Entry] = set()
    current = os.path.abspath(path)
    for _ in range(_MAX_HOPS):
        # realpath resolves links among the directories too (Kubernetes' `..data`); a swap of
        # one of those shows up as a different real directory on the next resolve.
        directory = os.path.realpath(os.path.dirname(current))
        name = os.path.basename(current)
        entries.add((directory, name))
        try:
            target = os.readlink(os.path.join(directory, name))
        except OSError:  # not a link, or not there: the chain ends here
            break
        current = os.path.join(directory, target)  # an absolute target replaces the directory
    return frozenset(entries)


def _existing_dirs(entries: Iterable[Entry]) -> dict[str, DirId]:
    """The chain's directories that exist now, with their identity."""
    dirs: dict[str, DirId] = {}
    for directory, _ in entries:
        try:
            info = os.stat(directory)
        except OSError:  # a dangling link's missing directory; the tick notices when it appears
            continue
        dirs[directory] = (info.st_dev, info.st_ino)
    return dict(sorted(dirs.items()))


def _touches(changes: Iterable[tuple[watchfiles.Change, str]], entries: frozenset[Entry]) -> bool:
    """Whether a batch changed one of ``entries``, whatever the change type.

    The type says little: a rename over the config is reported as `added` (with a `deleted`
    for the temp name), a delete + recreate as `added` and `deleted` in one unordered set.
    """
    real_dirs: dict[str, str] = {}
    for _, changed in changes:
        directory = os.path.dirname(changed)
        if directory not in real_dirs:
            real_dirs[directory] = os.path.realpath(directory)
        if (real_dirs[directory], os.path.basename(changed)) in entries:
            return True
    return False


def _call(on_change: Callable[[], None]) -> None:
    try:
        on_change()
    except Exception:
        # The callback only starts a reload and should not raise; if it does, that is a bug
        # to log, but the watcher must outlive it or live config stops for good.
        logger.error("the config change callback failed", exc_info=True)


async def _sleep_unless_stopped(stop_event: asyncio.Event | None, seconds: float) -> None:
    if stop_event is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop_event.wait(), seconds)
