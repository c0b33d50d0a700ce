"""A c10d TCPStore the harness hosts on a loopback socket it already holds (no port race).

Used as the c10d rendezvous endpoint (agents join as clients, ``is_host=false``) and as an
explicit ``torch://host:port`` aggregation store. TCPStore takes ownership of the descriptor,
so the socket is detached once handed over.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from zephon_chaos.closing import Closing
from zephon_chaos.launch.ports import LOOPBACK, hold_loopback_listener


class StoreHost(Closing):
    """A TCPStore server on 127.0.0.1; ``close`` stops it and frees the port."""

    def __init__(self, timeout_s: float = 60.0, port: int = 0) -> None:
        """``port``: 0 for a free one the kernel picks; a given one raises ``OSError`` if it is
        held (a store that took over the port of one just closed)."""
        import torch.distributed as dist

        held = hold_loopback_listener(port=port)
        self.host = LOOPBACK
        self.port = held.port
        fd = held.sock.detach()
        self._store: Any = dist.TCPStore(
            LOOPBACK,
            self.port,
            is_master=True,
            master_listen_fd=fd,
            use_libuv=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout_s),
        )

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def store(self) -> Any:
        if self._store is None:
            raise RuntimeError("the hosted store is closed")
        return self._store

    def close(self) -> None:
        self._store = None
        import gc

        gc.collect()
