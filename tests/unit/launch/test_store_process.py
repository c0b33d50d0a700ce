"""The hosted store in a process of its own: stopped, continued, killed, restarted empty."""

from __future__ import annotations

import socket
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.launch.store_process import StoreAction, StoreProcess, proc_state

pytestmark = [pytest.mark.cpu]


def client(port: int) -> Any:
    import torch.distributed as dist

    return dist.TCPStore(
        "127.0.0.1", port, is_master=False, timeout=timedelta(seconds=2), wait_for_workers=False
    )


def test_the_store_process_stalls_dies_and_comes_back_empty_on_its_port(tmp_path: Path) -> None:
    pids = tmp_path / "store.pids"
    with StoreProcess(pid_file=pids) as store:
        port = store.port
        kv = client(port)
        kv.set("k", b"v")
        assert store.stop().state == "T" and proc_state(store.pid or 0) == "T"
        got: list[bytes] = []
        call = threading.Thread(target=lambda: got.append(kv.get("k")), daemon=True)
        call.start()  # blocks on the stopped store (the known stalled-store defect)
        assert store.cont().state != "T"
        call.join(30)
        assert got == [b"v"], "a stall keeps the keys"
        old = store.pid
        store.restart()
        assert store.pid != old and store.port == port and proc_state(old or 0) == ""
        assert client(port).check(["k"]) is False, "a restarted store is empty"
        store.kill()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        assert [e.action for e in store.history] == [
            StoreAction.STARTED,
            StoreAction.STOPPED,
            StoreAction.CONTINUED,
            StoreAction.KILLED,
            StoreAction.RESTARTED,
            StoreAction.KILLED,
        ]
    recorded = {int(line.split("-")[0]) for line in pids.read_text().split()}
    assert len(recorded) >= 3  # the first server, its replacement, the spare
    assert all(proc_state(pid) == "" for pid in recorded), "a store process outlived close()"
