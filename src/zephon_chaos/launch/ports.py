"""Ports without races: hold the socket, or pick one and retry only on a clear bind failure.

Binding port 0, closing, and handing the number to another process races with every other
test under xdist. Where the harness hosts a server it keeps the listening socket and passes
the descriptor on (TCPStore accepts ``master_listen_fd``). Where torchrun binds by itself
(``--master-port``), a port is drawn from a range private to this xdist worker and the launch
is retried when the agent reports EADDRINUSE.
"""

from __future__ import annotations

import os
import random
import socket
from dataclasses import dataclass

import psutil

LOOPBACK = "127.0.0.1"
EADDRINUSE_MARKERS = ("EADDRINUSE", "Address already in use", "address already in use")


@dataclass
class HeldSocket:
    """A loopback TCP socket bound and listening; its port is ours until ``close``."""

    sock: socket.socket

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def fd(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()


def hold_loopback_listener(backlog: int = 128, port: int = 0) -> HeldSocket:
    """Bind 127.0.0.1:``port`` and listen; with port 0 the kernel picks a free port, and we
    never let go of it. A given port raises ``OSError`` if something else holds it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return HeldSocket(sock)


def worker_port_range() -> range:
    """A slice of 20000-29999 for this xdist worker, away from the ephemeral range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    span = 1000
    base = 20000 + (index % 10) * span
    return range(base, base + span)


def candidate_port(rng: random.Random | None = None) -> int:
    """A port in this worker's range that nothing listens on right now (a hint, not a lease)."""
    rng = rng or random.Random()
    ports = worker_port_range()
    busy = listening_ports()
    for _ in range(200):
        port = rng.choice(ports)
        if port not in busy:
            return port
    raise RuntimeError(
        f"no free port in {ports.start}-{ports.stop - 1}: this xdist worker's range is full; "
        "run `zephon-chaos clean` to stop leftovers of earlier runs"
    )


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state on this machine."""
    return {
        c.laddr.port
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr
    }


def is_bind_failure(text: str) -> bool:
    return any(marker in text for marker in EADDRINUSE_MARKERS)
