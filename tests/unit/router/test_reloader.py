"""The reload on a real ModelPool and a real config file: valid edits apply, invalid files change
nothing and say why (as `rapid-mlx validate` does), and concurrent reloads run one at a time.

Every model has ``preload = false`` and the pool is never started, so no worker process runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.errors import ModelNotFoundError
from router.ops.config import load_config
from router.ops.reload.reloader import Reloader, ReloadResult
from router.pool import ModelPool

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def checkpoint(tiny_models) -> Path:
    return tiny_models.path("qwen3")


def model_table(model_id: str, checkpoint: Path, *lines: str) -> str:
    return "\n".join([f"[models.{model_id}]", f'path = "{checkpoint}"', "preload = false", *lines]) + "\n"


class Setup:
    """A config file, the pool loaded from it and the reloader watching it."""

    def __init__(self, tmp_path: Path, text: str) -> None:
        self.file = tmp_path / "rapidmlx.toml"
        self.file.write_text(text)
        self.pool = ModelPool(load_config(self.file, env={}), tmp_path / "run")
        self.reloader = Reloader(self.pool, self.file, text=text, env={})

    async def edit(self, text: str) -> ReloadResult:
        self.file.write_text(text)
        return self.reloader.reload("api")


def run(scenario):
    """Run ``scenario`` in one event loop, letting the pool's background tasks (retiring handles) end."""

    async def main():
        outcome = await scenario()
        await asyncio.sleep(0.1)
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not pending, f"tasks left running: {pending}"
        return outcome

    return asyncio.run(main())


def test_a_valid_edit_applies_and_the_version_moves(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint, 'aliases = ["old"]'))
        assert setup.pool.resolve("old").model_id == "m"
        result = await setup.edit(model_table("m", checkpoint, 'aliases = ["new", "gpt-*"]'))
        assert result.ok and result.errors == []
        assert result.trigger == "api"
        assert result.version == 2 == setup.reloader.version
        assert result.changes == {"m": "router: aliases"}
        assert setup.reloader.last is result
        assert setup.pool.resolve("new").model_id == "m"
        assert setup.pool.resolve("gpt-4o").model_id == "m"  # a glob alias
        with pytest.raises(ModelNotFoundError):
            setup.pool.resolve("old")
        assert setup.pool.config.models["m"].aliases == ("new", "gpt-*")

    run(scenario)


def test_reloading_an_unchanged_file_changes_nothing(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint))
        handle = setup.pool.resolve("m")
        result = setup.reloader.reload("sighup")
        assert result.ok and result.changes == {} and result.server_changes == [] and result.needs_restart == []
        assert result.version == 1
        assert setup.pool.resolve("m") is handle

    run(scenario)


def test_an_engine_edit_of_an_unloaded_model_takes_effect_at_once(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint))
        result = await setup.edit(model_table("m", checkpoint, "max_concurrency = 2", "[models.m.kv_cache]", "bits = 8"))
        assert result.ok and result.changes == {"m": "engine: max_concurrency, kv_cache.bits"}
        # No worker serves the old settings, so the new ones route at once.
        config = setup.pool.resolve("m").config
        assert config.max_concurrency == 2 and config.kv_cache.bits == 8
        assert setup.pool.replacement_of("m") is None

    run(scenario)


def test_invalid_toml_changes_nothing_and_names_the_line(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint, 'aliases = ["a"]'))
        before = setup.pool.config
        result = await setup.edit(model_table("m", checkpoint, 'aliases = ["b"]', "max_queue = = 3"))
        assert not result.ok
        assert result.version == 1 == setup.reloader.version
        (error,) = result.errors
        assert error.startswith(f"{setup.file}: line 5, column 13: ")
        assert setup.pool.config is before
        assert setup.pool.resolve("a").model_id == "m"
        assert setup.reloader.last is result
        # Fixed, the next reload applies.
        fixed = await setup.edit(model_table("m", checkpoint, 'aliases = ["b"]'))
        assert fixed.ok and fixed.version == 2 and setup.pool.resolve("b").model_id == "m"

    run(scenario)


def test_a_bad_value_is_rejected_with_its_toml_path(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint))
        before = setup.pool.config
        result = await setup.edit(model_table("m", checkpoint, "max_concurrency = 0", 'aliases = ["x"]'))
        assert not result.ok and result.version == 1
        assert len(result.errors) == 1 and result.errors[0].startswith("models.m.max_concurrency:")
        assert setup.pool.config is before
        with pytest.raises(ModelNotFoundError):
            setup.pool.resolve("x")  # nothing of a rejected file applies, not even its valid parts

    run(scenario)


def validate_stderr(path: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAPIDMLX_")}
    done = subprocess.run([sys.executable, "-m", "router.cli", "validate", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr.splitlines()


def test_an_unknown_pinned_parser_is_rejected_with_the_line_validate_prints(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint))
        result = await setup.edit(model_table("m", checkpoint, 'tool_parser = "nope"'))
        assert not result.ok and result.version == 1
        assert setup.pool.config.models["m"].tool_parser == "auto"
        return result

    result = run(scenario)
    (line,) = result.errors
    assert line.startswith("models.m.tool_parser:") and "nope" in line
    returncode, stderr = validate_stderr(tmp_path / "rapidmlx.toml")
    assert returncode == 1
    assert stderr == result.errors


def test_edits_that_pile_up_before_a_reload_apply_the_latest_content_once(tmp_path, checkpoint):
    def text(alias: str) -> str:
        return model_table("m", checkpoint, f'aliases = ["{alias}"]')

    async def scenario():
        setup = Setup(tmp_path, text("v0"))
        for i in range(1, 5):  # saves that arrive while the watcher's batch is still open
            setup.file.write_text(text(f"v{i}"))
        result = setup.reloader.reload("watch")
        assert result.ok and result.changes == {"m": "router: aliases"} and result.version == 2
        assert setup.pool.config == load_config(setup.file, env={})
        assert setup.pool.resolve("v4").model_id == "m"
        assert setup.reloader.last is result

    run(scenario)


def test_a_burst_of_reloads_after_one_edit_applies_it_once(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint, 'aliases = ["a"]'))
        setup.file.write_text(model_table("m", checkpoint, 'aliases = ["b"]'))
        results = [setup.reloader.reload("watch") for _ in range(5)]  # watcher, SIGHUP and the API at once
        assert all(r.ok for r in results)
        assert [r.changes for r in results if r.changes] == [{"m": "router: aliases"}]
        assert setup.reloader.version == 2
        assert setup.pool.resolve("b").model_id == "m"

    run(scenario)


def test_a_removed_model_is_gone_and_an_added_one_resolves(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("keep", checkpoint) + model_table("gone", checkpoint, 'aliases = ["g"]'))
        gone = setup.pool.resolve("gone")
        result = await setup.edit(model_table("keep", checkpoint) + model_table("fresh", checkpoint, 'aliases = ["f-*"]'))
        assert result.ok and result.changes == {"gone": "removed", "fresh": "added"}
        assert set(setup.pool.handles) == {"keep", "fresh"}
        for name in ("gone", "g"):
            with pytest.raises(ModelNotFoundError):
                setup.pool.resolve(name)
        assert gone.retired
        assert setup.pool.resolve("fresh").model_id == "fresh"
        assert setup.pool.resolve("f-1").model_id == "fresh"

    run(scenario)


@pytest.fixture
def root_log_level():
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


def test_a_port_change_waits_for_a_restart_while_log_level_applies(tmp_path, checkpoint, root_log_level):
    async def scenario():
        setup = Setup(tmp_path, "[server]\nport = 8100\n" + model_table("m", checkpoint))
        result = await setup.edit("[server]\nport = 8200\n" + model_table("m", checkpoint))
        assert result.ok and result.needs_restart == ["port"] and result.server_changes == []
        assert setup.pool.config.server.port == 8100
        result = await setup.edit('[server]\nport = 8200\nlog_level = "error"\n' + model_table("m", checkpoint))
        assert result.ok and result.server_changes == ["log_level"]
        assert setup.pool.config.server.log_level == "error"
        assert logging.getLogger().level == logging.ERROR
        assert setup.pool.config.server.port == 8100

    run(scenario)


def test_a_reload_of_an_unchanged_file_keeps_the_version_after_a_port_edit(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, "[server]\nport = 8100\n" + model_table("m", checkpoint))
        edited = await setup.edit("[server]\nport = 8200\n" + model_table("m", checkpoint))
        again = setup.reloader.reload("api")  # the file did not change
        assert again.ok and again.version == edited.version

    run(scenario)


def test_without_a_config_file_there_is_nothing_to_reload(tmp_path, checkpoint):
    async def scenario():
        config = load_config(_write(tmp_path / "x.toml", model_table("m", checkpoint)), env={})
        pool = ModelPool(config, tmp_path / "run")
        reloader = Reloader(pool, None)
        result = reloader.reload("api")
        assert not result.ok and result.version == 1
        (error,) = result.errors
        assert "no config file" in error
        assert pool.config is config

    run(scenario)


def test_an_unreadable_file_is_rejected(tmp_path, checkpoint):
    async def scenario():
        setup = Setup(tmp_path, model_table("m", checkpoint))
        setup.file.unlink()
        result = setup.reloader.reload("watch")
        assert not result.ok and result.errors[0].startswith(f"{setup.file}: cannot read")
        assert setup.reloader.file_changed()
        assert setup.pool.resolve("m").model_id == "m"

    run(scenario)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
