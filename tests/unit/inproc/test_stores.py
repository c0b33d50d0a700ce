"""A torn-down launch's store: calls blocked on it end, and a rank that connects late still
finds a store instead of retrying a refused connect until its own timeout."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch.distributed as dist

from zephon_chaos.inproc.stores import StorePool


def _client(port: int) -> dist.TCPStore:
    return dist.TCPStore(
        "127.0.0.1", port, is_master=False, timeout=timedelta(seconds=30), wait_for_workers=False
    )


def test_hanging_up_ends_the_old_servers_calls_and_serves_the_port_again_empty() -> None:
    pool = StorePool()
    try:
        host = pool.open()
        early = _client(host.port)
        early.set("zephon/key", "before")
        pool.hang_up(host)
        with pytest.raises(dist.DistError):  # its server is gone: the call fails, not waits
            early.get("zephon/key")
        late = _client(host.port)  # connects at once: the port is served again
        assert not late.check(["zephon/key"]), "the successor is an empty store"
        late.set("zephon/key", "after")
        assert late.get("zephon/key") == b"after"
        assert pool.open_count == 1, "the successor is retired, closed with the pool"
    finally:
        pool.close()
