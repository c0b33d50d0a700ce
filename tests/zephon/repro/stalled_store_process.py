"""Standalone (torch and zephon only): a stopped store blocks Zephon's store calls past the
timeout that Zephon documents as their bound.

Run: ``python stalled_store_process.py``. A TCPStore server runs in a child process; a
``TorchKVStore`` client (what ``aggregate_store="torch://host:port"`` builds) with
``timeout_s=T`` connects and writes a key. The server is then stopped (SIGSTOP), and one
``get`` and one ``wait`` are timed from a thread; after ``STALL_S`` (> 3 T) the server is
continued (SIGCONT). Prints one JSON line: each call's seconds and outcome, T, the stall.
Zephon 0.2 ``KVStoreFactory``: the timeout "bounds the store's blocking operations,
including connection setup"; measured, each call returns only after the SIGCONT.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from zephon._internal.kvstore import TorchKVStore

TIMEOUT_S = 1.0
STALL_S = 8.0
SERVER = """
import sys, time
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, use_libuv=True,
                  wait_for_workers=False, timeout=timedelta(seconds=60))
print("serving", flush=True)
sys.stdin.readline()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(call: Any) -> dict[str, Any]:
    began = time.monotonic()
    try:
        outcome = {"result": repr(call())}
    except Exception as exc:
        outcome = {"error": f"{type(exc).__name__}: {exc}"[:160]}
    return {**outcome, "s": round(time.monotonic() - began, 2)}


def main() -> int:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "serving"
        kv = TorchKVStore("127.0.0.1", port, timeout_s=TIMEOUT_S)
        kv.set("k", b"v")
        os.kill(server.pid, signal.SIGSTOP)
        calls: dict[str, Any] = {}
        threads = [
            threading.Thread(target=lambda: calls.update(get=timed(lambda: kv.get("k")))),
            threading.Thread(
                target=lambda: calls.update(
                    wait=timed(lambda: TorchKVStore("127.0.0.1", port, timeout_s=TIMEOUT_S).wait(
                        ["absent"], TIMEOUT_S
                    ))
                )
            ),
        ]
        for t in threads:
            t.start()
        time.sleep(STALL_S)  # the stall's length: the point of the experiment
        returned_while_stopped = sorted(calls)
        os.kill(server.pid, signal.SIGCONT)
        for t in threads:
            t.join(30)
        print(
            json.dumps(
                {
                    "timeout_s": TIMEOUT_S,
                    "stall_s": STALL_S,
                    "returned_while_stopped": returned_while_stopped,
                    **calls,
                }
            )
            + "\n",
            end="",
            flush=True,
        )
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
