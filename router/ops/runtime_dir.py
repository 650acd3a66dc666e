"""The runtime dir holds the worker sockets: it must be ours alone, or we refuse to start.

Whoever can write to the directory can replace a socket between the router's bind and its
worker's connect. The default `<tempdir>/rapid-mlx-<uid>` is a name any local user can
create first, so an existing directory is checked, never trusted: a real directory (not a
symlink), owned by this user, closed to group and others (mode 0700).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class RuntimeDirError(Exception):
    """The runtime dir is not private to this user; the message says how to fix it."""


def prepare_runtime_dir(path: Path) -> Path:
    """Create ``path`` with mode 0700, or check that the existing one is private.

    Raises:
        RuntimeDirError: it is a symlink or not a directory, belongs to another user, or is
            open to group or others.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RuntimeDirError(f"cannot create the runtime dir {path}: {exc.strerror or exc}") from None
    info = os.lstat(path)
    fix = "set [server] runtime_dir to a directory of your own"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(f"the runtime dir {path} is not a plain directory (a symlink or a file); remove it or {fix}")
    if info.st_uid != os.geteuid():
        raise RuntimeDirError(
            f"the runtime dir {path} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()}): "
            f"that user could replace the worker sockets in it; remove it or {fix}")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise RuntimeDirError(
            f"the runtime dir {path} has mode {stat.S_IMODE(info.st_mode):04o}, open to other users; "
            f"it must be 0700 (chmod 700 {path}) or {fix}")
    return path
