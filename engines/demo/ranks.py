"""Data-parallel ranks for the demo build: the same training in more processes, one core each.

A step of the demo model is compute-bound on one core (MLX's CPU ops and a one-thread
OpenBLAS), and a second BLAS thread changes the weights without making it much faster
(engines/demo/README.md, "Reproducing it"). Two processes that each take half of every
batch's rows and sum their gradients (``train.train``'s ``group``) take 0.55-0.60 of the
time per step (docs/benchmarks.md). The rank count is part of the recipe (``build.Recipe.ranks``): a group of two sums the
gradient in another order than one process does, so its weights are its own, and the same on
every rerun.

The build (rank 0) starts the other ranks with ``start_ranks``; each runs ``python -m
engines.demo.ranks``, trains exactly what rank 0 trains (every rank draws the whole batch
stream and keeps its rows), and writes nothing. They talk over MLX's ``ring`` backend on
loopback, the backend a sharded model uses across Macs (engines/shard/).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mlx.core as mx

    from engines.demo.build import Recipe

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


def _free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out and released (the ring binds them a moment later)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in sockets]


def _join_group(rank: int, hostfile: Path) -> mx.distributed.Group:
    """This process's place in the ring ``hostfile`` describes (MLX reads both from the environment)."""
    import mlx.core as mx

    os.environ["MLX_RANK"] = str(rank)
    os.environ["MLX_HOSTFILE"] = str(hostfile)
    return mx.distributed.init(strict=True, backend="ring")


def _fail_when_a_rank_fails(process: subprocess.Popen, rank: int, stopping: threading.Event) -> None:
    """Rank 0 would wait forever in its next gradient sum for a rank that died: end the build
    (unless rank 0 is stopping the ranks itself, on its way out with an error of its own)."""
    code = process.wait()
    if code != 0 and not stopping.is_set():
        logger.error("demo build: rank %d exited with status %d; stopping the build", rank, code)
        sys.stderr.flush()
        os._exit(1)


@contextlib.contextmanager
def start_ranks(ranks: int, tokenizer_dir: Path, config: dict[str, Any], *, seed: int,
                recipe: Recipe) -> Iterator[mx.distributed.Group | None]:
    """Start ranks 1..``ranks``-1 training ``recipe`` beside this process and yield rank 0's
    group (None for one rank: nothing to start). On leaving, wait for the others to finish
    their last step; on an error, stop them.

    A rank that exits with an error ends this process too (status 1, the rank named in the log),
    rather than leaving it blocked on a sum that never completes.
    """
    if ranks == 1:
        yield None
        return
    scratch = Path(tempfile.mkdtemp(prefix="rapidmlx-demo-ranks-"))
    children, stopping = [], threading.Event()
    try:
        hostfile = scratch / "hosts.json"
        hostfile.write_text(json.dumps([[f"{LOOPBACK}:{port}"] for port in _free_ports(ranks)]))
        job = json.dumps({"tokenizer_dir": str(tokenizer_dir), "config": config, "seed": seed,
                          "recipe": dataclasses.asdict(recipe), "parent": os.getpid()})
        for rank in range(1, ranks):
            env = {**os.environ, "MLX_RANK": str(rank), "MLX_HOSTFILE": str(hostfile)}
            child = subprocess.Popen([sys.executable, "-m", "engines.demo.ranks", job], env=env,
                                     stdin=subprocess.DEVNULL)
            children.append(child)
            threading.Thread(target=_fail_when_a_rank_fails, args=(child, rank, stopping),
                             name=f"demo-rank-{rank}", daemon=True).start()
        logger.info("training on %d data-parallel ranks (ring on loopback, one process per rank)", ranks)
        group = _join_group(0, hostfile)
        # Every rank has read the hostfile once the ring is up. Removed now, it does not outlive
        # a build that ends by os._exit (a rank failed) or by a kill, where no cleanup runs.
        shutil.rmtree(scratch)
        yield group
        for child in children:
            child.wait(timeout=120)
    finally:
        stopping.set()
        if scratch.exists():
            shutil.rmtree(scratch)
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def _exit_with_parent(parent: int) -> None:
    """A rank whose build is gone has nobody to sum with: exit instead of waiting."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def main(argv: list[str] | None = None) -> int:
    """A rank > 0 of a demo build: ``python -m engines.demo.ranks JOB`` (JSON from ``start_ranks``)."""
    parser = argparse.ArgumentParser(prog="python -m engines.demo.ranks", description=__doc__.splitlines()[0])
    parser.add_argument("job", help="JSON: tokenizer_dir, config, seed, recipe, parent")
    job = json.loads(parser.parse_args(argv).job)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s rank %(process)d %(name)s %(message)s")
    threading.Thread(target=_exit_with_parent, args=(job["parent"],), daemon=True).start()

    import mlx.core as mx

    from engines.demo import build

    mx.set_default_device(mx.cpu)
    build.single_threaded_blas()
    group = mx.distributed.init(strict=True, backend="ring")
    build.train_model(Path(job["tokenizer_dir"]), job["config"], seed=job["seed"],
                      recipe=build.Recipe(**job["recipe"]), group=group)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
