"""``mlx.launch``, run from this module so that an idle group costs no CPU in its launcher.

mlx.launch's I/O loop (``mlx._distributed_utils.launch``, mlx 0.32) selects on each rank's
stdin pipe for writing and on its own stdin for reading. A pipe with room is always writable,
and an inherited ``/dev/null`` is always readable, so each select returns at once and the
launcher spins: about 0.7 of a core on this machine for a group doing nothing. The ranks
never read stdin (rank 0 hears the router over its socket), so nothing is worth forwarding:
here the launcher's ``select`` waits on the ranks' output alone, and its own stdin is left out.
Everything else (hosts, ssh, rank environment, teardown when a rank dies) is mlx.launch's.
"""

from __future__ import annotations

import select as _select_module
import sys
import time

STDIN = 0


def select_output_only(rlist, wlist, xlist, timeout=None):
    """``select.select`` without write readiness and without the launcher's own stdin."""
    reads = [fd for fd in rlist if fd != STDIN]
    if not reads:
        if timeout:
            time.sleep(timeout)
        return [], [], []
    ready, _, errors = _select_module.select(reads, [], xlist, timeout)
    return ready, [], errors


def main() -> int:
    from mlx._distributed_utils import launch

    if not hasattr(launch, "select"):  # its I/O loop changed: run it as it is
        return launch.main()
    launch.select = select_output_only
    sys.argv[0] = "mlx.launch"
    return launch.main()


if __name__ == "__main__":
    sys.exit(main())
