"""Idle ranks of a sharded model wait in the kernel, not in a collective.

MLX's ring backend waits for a collective's bytes by polling: a rank that enters the next
step's ``all_sum`` before rank 0 spins until rank 0 arrives, which for an idle model is
always (about one core per waiting rank on this machine). So once a step shares no inputs and
nothing is left to do, every rank but rank 0 blocks on a plain TCP connection to rank 0 (its
"doorbell") instead; rank 0 rings it (one byte to each rank) when it has inputs again, and
only then does the group enter the next collective. Every rank sees the same shared inputs and
the same scheduler state, so all agree, without a message, on when the others doze.

The connections are set up once, right after the group starts: rank 0 listens on a free port
of the address the other ranks already reach it at (the ring hostfile's or jaccl's
coordinator's), and tells them the port and a one-time secret through the group itself. A
connection that does not present the secret is dropped. Without such an address the group
works as before, polling.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import socket
from pathlib import Path

from engines.shard.lockstep import Lockstep
from engines.worker import recv_exact

logger = logging.getLogger(__name__)

ACCEPT_TIMEOUT_S = 60.0
SECRET_BYTES = 16
RING = b"\x01"


class DoorbellClosedError(ConnectionError):
    """Rank 0's end of the doorbell closed: it is gone, and this rank goes too."""


class Doorbell:
    """Rank 0: a connection to each other rank. Every other rank: its connection to rank 0."""

    def __init__(self, connections: list[socket.socket]) -> None:
        self._connections = connections

    def ring(self) -> None:
        """Rank 0: wake every dozing rank (they enter the next collective)."""
        for connection in self._connections:
            connection.sendall(RING)

    def doze(self) -> None:
        """Any other rank: block until rank 0 rings.

        Raises:
            DoorbellClosedError: rank 0 is gone.
        """
        if not self._connections[0].recv(1):
            raise DoorbellClosedError("rank 0 closed the doorbell")

    def close(self) -> None:
        for connection in self._connections:
            connection.close()


def open_doorbell(lockstep: Lockstep, environ: dict[str, str] | None = None) -> Doorbell | None:
    """Connect every rank to rank 0 (a collective: every rank calls it at the same point).

    None on every rank when rank 0 has no address the others reach, or could not listen there.
    """
    environ = dict(os.environ) if environ is None else environ
    listener = None
    payload = None
    if lockstep.leader:
        payload = b""
        host = leader_address(environ)
        if host is not None:
            try:
                listener = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
            except OSError as exc:
                logger.warning("no doorbell on %s (%s): idle ranks poll", host, exc)
            else:
                secret = os.urandom(SECRET_BYTES)
                payload = json.dumps({"host": host, "port": listener.getsockname()[1], "secret": secret.hex()}).encode()
    shared = lockstep.share_bytes(payload)
    if not shared:
        return None
    address = json.loads(shared)
    secret = bytes.fromhex(address["secret"])
    if lockstep.leader:
        try:
            return Doorbell(_accept_ranks(listener, secret, lockstep.size - 1))
        finally:
            listener.close()
    connection = socket.create_connection((address["host"], address["port"]), timeout=ACCEPT_TIMEOUT_S)
    connection.settimeout(None)
    connection.sendall(secret)
    return Doorbell([connection])


def leader_address(environ: dict[str, str]) -> str | None:
    """The address of rank 0 the other ranks reach: the first entry of the ring hostfile that
    mlx.launch wrote (``MLX_HOSTFILE``), or jaccl's coordinator (``MLX_JACCL_COORDINATOR``)."""
    coordinator = environ.get("MLX_JACCL_COORDINATOR")
    if coordinator:
        return coordinator.rpartition(":")[0].strip("[]") or None
    hostfile = environ.get("MLX_HOSTFILE")
    if not hostfile:
        return None
    try:
        ranks = json.loads(Path(hostfile).read_text())
        first = ranks[0][0] if isinstance(ranks[0], list) else ranks[0]
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return None
    if not isinstance(first, str):
        return None
    return first.rpartition(":")[0].strip("[]") or None


def _accept_ranks(listener: socket.socket, secret: bytes, count: int) -> list[socket.socket]:
    """The connections of ``count`` ranks that present ``secret`` (others are dropped).

    Raises:
        TimeoutError: the ranks did not all connect within ACCEPT_TIMEOUT_S.
    """
    listener.settimeout(ACCEPT_TIMEOUT_S)
    connections: list[socket.socket] = []
    while len(connections) < count:
        connection, peer = listener.accept()
        connection.settimeout(ACCEPT_TIMEOUT_S)
        try:
            presented = recv_exact(connection, len(secret)) or b""
        except OSError:
            presented = b""
        if not hmac.compare_digest(presented, secret):
            logger.warning("doorbell: dropped a connection from %s without the group's secret", peer[0])
            connection.close()
            continue
        connection.settimeout(None)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connections.append(connection)
    return connections

