"""The runtime dir is created private, and an existing one that is not is refused."""

from __future__ import annotations

import os
import stat

import pytest

from router.ops.runtime_dir import RuntimeDirError, prepare_runtime_dir


def test_a_new_dir_is_created_0700(tmp_path):
    path = prepare_runtime_dir(tmp_path / "a" / "run")
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o700 and os.lstat(path).st_uid == os.geteuid()


def test_an_existing_private_dir_is_used(tmp_path):
    (tmp_path / "run").mkdir(mode=0o700)
    assert prepare_runtime_dir(tmp_path / "run") == tmp_path / "run"


def test_a_dir_open_to_others_is_refused(tmp_path):
    path = tmp_path / "run"
    path.mkdir()
    path.chmod(0o777)
    with pytest.raises(RuntimeDirError, match="mode 0777.*chmod 700"):
        prepare_runtime_dir(path)


def test_a_dir_of_another_user_is_refused(tmp_path):
    if os.geteuid() == 0:
        path = tmp_path / "run"
        path.mkdir(mode=0o700)
        os.chown(path, 65534, 65534)  # nobody: the user who got there first
    else:
        path = tmp_path.parents[len(tmp_path.parents) - 1]  # "/": a directory of root's
    with pytest.raises(RuntimeDirError, match="belongs to uid"):
        prepare_runtime_dir(path)


def test_a_symlink_is_refused_even_to_a_private_dir(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "run").symlink_to(target)
    with pytest.raises(RuntimeDirError, match="not a plain directory"):
        prepare_runtime_dir(tmp_path / "run")
