"""The config watcher sees every way editors save a file, through symlinks, once per burst.

Real files and real watchfiles: what is under test is which events the OS reports for each
way of saving, and whether the watcher turns them into one ``on_change`` call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from router.ops.reload.watch import watch_config_file

TIMEOUT_S = 5.0
QUIET_S = 1.0  # how long "no call" is awaited: a stray call would come within 2 debounces + 0.1 s
FAST_MS = 50  # the debounce of most tests: the default 200 ms only slows them down


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


async def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


class Watch:
    """A running watcher; ``reads`` holds what the config read at each on_change call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reads: list[str | None] = []
        self.stop = asyncio.Event()
        self.fail = False

    def on_change(self) -> None:
        self.reads.append(read(self.path))  # what the reloader would load
        if self.fail:
            raise RuntimeError("a bug in the reloader")

    async def changed(self, count: int = 1) -> bool:
        return await wait_until(lambda: len(self.reads) >= count)

    async def stays_quiet(self) -> bool:
        await asyncio.sleep(QUIET_S)
        return not self.reads


@contextlib.asynccontextmanager
async def watching(path: Path, debounce_ms: int = FAST_MS) -> AsyncIterator[Watch]:
    watch = Watch(path)
    task = asyncio.create_task(
        watch_config_file(path, watch.on_change, debounce_ms=debounce_ms, stop_event=watch.stop))
    try:
        # The watch is in place once a write through `path` is seen. A write made before awatch
        # added its inotify watches goes unseen, hence the head start and the retries (rarely
        # needed; a retry never races a pending call: it waits 1 s, a call comes within 0.2 s).
        await asyncio.sleep(0.1)
        for _ in range(5):
            path.write_text(read(path) or "")
            if await wait_until(lambda: bool(watch.reads), timeout=1.0):
                break
        else:
            pytest.fail("the watcher never saw a write to the config")
        watch.reads.clear()
        yield watch
    finally:
        watch.stop.set()
        await asyncio.wait_for(task, 2.0)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "conf" / "rapidmlx.toml"
    path.parent.mkdir()
    path.write_text("v = 0\n")
    return path


def test_an_in_place_write_triggers(config):
    async def scenario():
        async with watching(config) as watch:
            with config.open("r+") as file:  # same inode: truncate and write
                file.truncate()
                file.write("v = 1\n")
            assert await watch.changed() and watch.reads[-1] == "v = 1\n"

    asyncio.run(scenario())


def test_a_temp_file_renamed_over_the_config_triggers(config):
    async def scenario():
        async with watching(config) as watch:
            temp = config.with_name(".rapidmlx.toml.tmp")  # the vim / VS Code / atomic-writer way
            temp.write_text("v = 2\n")
            os.replace(temp, config)
            assert await watch.changed() and watch.reads == ["v = 2\n"]

    asyncio.run(scenario())


def test_delete_and_recreate_triggers(config):
    async def scenario():
        async with watching(config) as watch:
            config.unlink()
            config.write_text("v = 3\n")
            assert await watch.changed() and watch.reads[-1] == "v = 3\n"

    asyncio.run(scenario())


def test_a_burst_of_writes_triggers_once_or_twice_and_the_last_read_is_the_last_write(config):
    async def scenario():
        async with watching(config, debounce_ms=200) as watch:  # the default
            for i in range(5):
                config.write_text(f"v = {i}\n")
                await asyncio.sleep(0.02)
            assert await watch.changed()
            await asyncio.sleep(0.5)  # room for a second call, were the burst split
            assert 1 <= len(watch.reads) <= 2 and watch.reads[-1] == "v = 4\n"

    asyncio.run(scenario())


def test_other_files_in_the_directory_do_not_trigger(config):
    async def scenario():
        async with watching(config) as watch:
            config.with_name("rapidmlx.toml.swp").write_text("swap")
            config.with_name("other.toml").write_text("x = 1\n")
            temp = config.with_name(".other.toml.tmp")
            temp.write_text("x = 2\n")
            os.replace(temp, config.with_name("other.toml"))
            assert await watch.stays_quiet()

    asyncio.run(scenario())


def test_a_failing_callback_does_not_stop_the_watch(config, caplog):
    async def scenario():
        async with watching(config) as watch:
            watch.fail = True
            config.write_text("v = 1\n")
            assert await watch.changed()
            config.write_text("v = 2\n")
            assert await watch.changed(2) and watch.reads[-1] == "v = 2\n"

    with caplog.at_level(logging.ERROR, logger="router.ops.reload.watch"):
        asyncio.run(scenario())
    failures = [record for record in caplog.records if record.exc_info]
    assert len(failures) == 2 and "a bug in the reloader" in str(failures[0].exc_info[1])


def test_editing_a_symlinked_config_s_target_triggers(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "srv").mkdir()
    target = tmp_path / "srv" / "v1.toml"
    target.write_text("v = 1\n")
    link = tmp_path / "etc" / "rapidmlx.toml"
    link.symlink_to(target)

    async def scenario():
        async with watching(link) as watch:
            temp = target.with_name(".v1.toml.tmp")
            temp.write_text("v = 2\n")
            os.replace(temp, target)  # an atomic save of the target, in its own directory
            assert await watch.changed() and watch.reads[-1] == "v = 2\n"

    asyncio.run(scenario())


def test_a_retargeted_symlink_triggers_and_moves_the_watch_to_the_new_target(tmp_path):
    for name in ("etc", "v1", "v2"):
        (tmp_path / name).mkdir()
    old, new = tmp_path / "v1" / "config.toml", tmp_path / "v2" / "config.toml"
    old.write_text("v = 1\n")
    link = tmp_path / "etc" / "rapidmlx.toml"
    link.symlink_to(old)

    async def scenario():
        async with watching(link) as watch:
            new.write_text("v = 2\n")
            staged = link.with_name(".rapidmlx.toml.new")
            staged.symlink_to(new)
            os.replace(staged, link)
            assert await watch.changed() and watch.reads[-1] == "v = 2\n"

            watch.reads.clear()
            new.write_text("v = 3\n")
            assert await watch.changed() and watch.reads[-1] == "v = 3\n"

            await asyncio.sleep(0.3)  # let that batch end before watching for silence
            watch.reads.clear()
            old.write_text("v = 99\n")
            assert await watch.stays_quiet()

    asyncio.run(scenario())


def test_a_kubernetes_configmap_swap_triggers(tmp_path):
    # The kubelet's layout: name -> ..data/name, ..data -> ..<timestamp>; an update writes a new
    # timestamped directory, renames a new ..data link over the old one, and removes the old dir.
    mount = tmp_path / "config"
    (mount / "..2024_01").mkdir(parents=True)
    (mount / "..2024_01" / "rapidmlx.toml").write_text("v = 1\n")
    (mount / "..data").symlink_to("..2024_01")
    config = mount / "rapidmlx.toml"
    config.symlink_to("..data/rapidmlx.toml")

    async def scenario():
        async with watching(config) as watch:
            (mount / "..2024_02").mkdir()
            (mount / "..2024_02" / "rapidmlx.toml").write_text("v = 2\n")
            (mount / "..data_tmp").symlink_to("..2024_02")
            os.replace(mount / "..data_tmp", mount / "..data")
            shutil.rmtree(mount / "..2024_01")
            assert await watch.changed() and watch.reads[-1] == "v = 2\n"

    asyncio.run(scenario())


def test_a_removed_directory_is_watched_again_once_it_is_back(config, caplog):
    def retrying() -> bool:
        return any("retrying every second" in record.getMessage() for record in caplog.records)

    async def scenario():
        async with watching(config) as watch:
            shutil.rmtree(config.parent)
            assert await wait_until(retrying)
            config.parent.mkdir()
            config.write_text("v = 5\n")
            # Changes made while unwatched are unknown: one call once the watch is back.
            assert await watch.changed() and watch.reads == ["v = 5\n"]

    with caplog.at_level(logging.WARNING, logger="router.ops.reload.watch"):
        asyncio.run(scenario())
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per outage, not once per retry


def test_the_stop_event_ends_the_watch_promptly(config):
    async def scenario():
        stop = asyncio.Event()
        task = asyncio.create_task(watch_config_file(config, lambda: None, stop_event=stop))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        stop.set()
        await asyncio.wait_for(task, 2.0)
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 2.0


def test_cancelling_the_watch_is_prompt_and_leaves_the_stop_event_alone(config):
    async def scenario():
        stop = asyncio.Event()
        task = asyncio.create_task(watch_config_file(config, lambda: None, stop_event=stop))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 2.0)
        return time.monotonic() - started, stop.is_set()

    elapsed, stop_set = asyncio.run(scenario())
    assert elapsed < 2.0 and not stop_set  # the caller's event may be shared: cancelling is not shutdown


def test_a_debounce_of_zero_is_refused(config):
    with pytest.raises(ValueError, match="debounce_ms"):
        asyncio.run(watch_config_file(config, lambda: None, debounce_ms=0))
