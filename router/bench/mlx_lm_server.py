"""``python -m router.bench.mlx_lm_server ARGS``: ``mlx_lm.server`` with a listen backlog that holds a burst.

mlx_lm.server serves on the standard library's ThreadingHTTPServer, whose listen backlog is
socketserver's default of 5. A burst of more simultaneous connections than that overflows the
kernel's accept queue: clients see resets (macOS) or retransmitted handshakes a second or more
later (Linux), which would count against the server's time to first token and errors in a
comparison of engines. This entry point raises the backlog and runs mlx_lm.server's own
``main`` unchanged, with the same arguments.
"""

from __future__ import annotations

import http.server

# Enough for every client of the largest burst the benchmarks send, with room to spare.
LISTEN_BACKLOG = 1024


def main() -> None:
    # A class attribute, read when the server socket listens: mlx_lm.server builds its
    # ThreadingHTTPServer after this runs.
    http.server.ThreadingHTTPServer.request_queue_size = LISTEN_BACKLOG
    from mlx_lm.server import main as serve

    serve()


if __name__ == "__main__":
    main()
