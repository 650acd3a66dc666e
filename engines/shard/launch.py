"""The ``mlx.launch`` command line that starts a sharded model's ranks.

``mlx.launch`` (run through engines/shard/launcher.py) starts one process per host entry (local ones directly, others over ssh) with
the rank and the group's addresses in their environment; the ring backend listens on
``--starting-port`` and the ports after it, one per rank, so the router picks a free run of
ports each time (two groups on one machine, or a restart while the old ports linger).
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import sys
from pathlib import Path

from engines.protocol import ShardSpec, WorkerSpec

PORT_ATTEMPTS = 50
PORT_RANGE = (20000, 32000)


def launcher_path(python: str = sys.executable) -> str:
    """The ``mlx.launch`` script of this interpreter's environment (or the one on PATH).

    Raises:
        FileNotFoundError: MLX's launcher is not installed.
    """
    beside = Path(python).parent / "mlx.launch"
    if beside.is_file():
        return str(beside)
    found = shutil.which("mlx.launch")
    if found is None:
        raise FileNotFoundError("mlx.launch is not installed (it comes with the mlx package)")
    return found


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive TCP ports free on ``host`` now.

    Drawn below the ephemeral ranges (Linux 32768+, macOS 49152+): there, an outgoing
    connection could take a port between this check and the ranks' listen, and a group that
    cannot listen fails its start.
    """
    for _ in range(PORT_ATTEMPTS):
        start = random.randrange(PORT_RANGE[0], PORT_RANGE[1] - count)
        if all(_is_free(host, port) for port in range(start, start + count)):
            return start
    raise OSError(f"no run of {count} free ports on {host}")


def _is_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def rank_count(shard: ShardSpec) -> int:
    """How many ranks the group has: its hosts, or the hosts its hostfile lists.

    Raises:
        OSError: the hostfile cannot be read or holds no hosts.
    """
    if not shard.hostfile:
        return len(shard.hosts)
    try:
        data = json.loads(Path(shard.hostfile).read_text())
    except ValueError as exc:
        raise OSError(f"hostfile {shard.hostfile} is not JSON: {exc}") from None
    hosts = data.get("hosts", []) if isinstance(data, dict) else data
    if not isinstance(hosts, list) or not hosts:
        raise OSError(f"hostfile {shard.hostfile} lists no hosts")
    return len(hosts)


def launch_argv(spec: WorkerSpec, *, starting_port: int, python: str = sys.executable) -> list[str]:
    """The command that starts every rank of ``spec``'s model (``spec.shard`` must be set).

    Each rank runs ``python -m engines.shard.worker``: the same interpreter path on every host
    (a fleet installs rapid-mlx alike on each Mac).
    """
    shard: ShardSpec = spec.shard
    launcher_path(python)  # installed, or fail here with a clear error
    # mlx.launch's own main, without its idle busy loop (engines/shard/launcher.py).
    argv = [python, "-m", "engines.shard.launcher", "--backend", shard.backend]
    if shard.hostfile:
        argv += ["--hostfile", shard.hostfile]
    else:
        argv += ["--hosts", ",".join(shard.hosts)]
    argv += ["--starting-port", str(starting_port), "--",
             python, "-m", "engines.shard.worker", "--model-id", spec.model_id, "--backend", shard.backend]
    return argv
