"""Standalone (torch, zephon and the standard library only): after the store has died,
dropping the leader's pipeline blocks the dropping thread for about one store connection
timeout, inside the engine's finalizer.

Run: ``python dead_store_finalizer.py``. Two ranks (threads, each with its own pipeline,
``runner="inline"``, C=2) aggregate one checkpoint through a TCPStore served by a child
process of this script (``aggregate_store="torch://127.0.0.1:PORT"``, ``aggregate_timeout_s=T``).
The round completes; the leader keeps its result as the closed round's marker. Two cases:
the pipelines are dropped (their last references, then a collection) with the store alive; or
the store process is killed first (SIGKILL, as a crashed store host), the leader's next
``checkpoint()`` fails, as it must, and then the pipelines are dropped, as a trainer that
rebuilds its loader after the failure, or a process that exits, drops them.

Observed (zephon 0.2.0, 2 cores): with the store alive the drop takes 0.1 s; after the store's
death it takes 1.4-2.4 T (2.7 and 4.6 s at T = 2 s, 12 s at T = 5 s), all of it in the
leader's ``RoundCoordinator.cleanup`` called by ``Engine.__del__``, whose error is then
swallowed: the thread that drops the pipeline waits out a connection to a store known to be
gone, minutes at the default T = 180 s.

Cause, in Zephon 0.2.0's source:

- ``_internal/engine.py`` ``Engine.__del__`` (489-493) calls ``_clean_merged`` (495-498),
  ``coordinator.cleanup()``;
- ``_internal/coordination.py`` ``RoundCoordinator.cleanup`` (660-674) deletes the retained
  result of the last round (``self._delete(self._previous_result)``), one store call;
- ``_internal/kvstore.py`` ``TorchKVStore._call`` (212-225) drops its client after a failed
  call, so after the store's death the delete builds a new ``TCPStore`` client (``_client``,
  227-240) whose connection set-up waits up to ``timeout=T``, retried by c10d within it.

Prints one JSON line per case: ``{"case", "timeout_s", "checkpoint_failed_s" (the leader's
next checkpoint, which fails), "drop_s" (dropping both pipelines), "cleanup_s" (each engine
finalizer's ``RoundCoordinator.cleanup``, timed by a wrapper that changes no outcome)}``.
Option (environment): ``DEAD_STORE_TIMEOUT_S`` (default 2).
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon._internal.coordination import RoundCoordinator

WORLD = 2
JOIN_S = 60.0
"""A rank thread's bound, and any wait of this script's own."""
SERVER = """
import sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, use_libuv=True,
                  wait_for_workers=False, timeout=timedelta(seconds=60))
print("serving", flush=True)
sys.stdin.readline()
"""


CLEANUPS: list[float] = []
"""Seconds of each ``RoundCoordinator.cleanup`` call (timed, its outcome unchanged)."""
_cleanup = RoundCoordinator.cleanup


def timed_cleanup(self: RoundCoordinator) -> None:
    began = time.monotonic()
    try:
        _cleanup(self)
    finally:
        CLEANUPS.append(round(time.monotonic() - began, 3))


RoundCoordinator.cleanup = timed_cleanup  # type: ignore[method-assign]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build(rank: int, port: int, timeout_s: float, run_id: str) -> Any:
    rows = {s: InMemoryShard([{"i": i, "shard": s} for i in range(40)]) for s in range(WORLD)}
    source = StaticMixtureWorkSource(
        datasets=[Dataset.from_dict("a", rows)],
        mixture=MixtureSpec({"a": 1.0}),
        chunk_size=16,
        seed=7,
        shuffle_within_shard=True,
    )
    return (
        Pipeline(source)
        .batch(microbatch_size=4)
        .options(
            world_size=WORLD,
            global_rank=rank,
            canonical_replicas=WORLD,
            run_id=run_id,
            runner="inline",
            aggregate_store=f"torch://127.0.0.1:{port}",
            aggregate_timeout_s=timeout_s,
        )
    )


def one_case(kill_store: bool, timeout_s: float) -> dict[str, Any]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "serving"
        pipes = [build(r, port, timeout_s, f"finalizer-{int(kill_store)}") for r in range(WORLD)]
        errors: list[str] = []

        def rank_main(rank: int) -> None:
            try:
                it = iter(pipes[rank])
                next(it)
                pipes[rank].checkpoint()
            except Exception as exc:  # reported below
                errors.append(f"rank {rank}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(WORLD)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(JOIN_S)
        assert not errors and not any(t.is_alive() for t in threads), errors
        del threads
        gc.collect()
        failed_s = None
        if kill_store:
            server.kill()
            server.wait(10)
            began = time.monotonic()
            try:  # the next checkpoint fails: the store is gone
                pipes[0].checkpoint()
            except RuntimeError as exc:
                failed_s = round(time.monotonic() - began, 3)
                print(f"leader's next checkpoint failed: {exc}"[:200], file=sys.stderr)
        del CLEANUPS[:]
        began = time.monotonic()
        pipes.clear()  # the pipelines' last references: their engines' finalizers run now
        gc.collect()  # or at the collection of the cycles that hold them
        drop_s = time.monotonic() - began
        return {"case": "store dead" if kill_store else "store alive", "timeout_s": timeout_s,
                "checkpoint_failed_s": failed_s, "drop_s": round(drop_s, 3),
                "cleanup_s": list(CLEANUPS)}
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)


def main() -> None:
    timeout_s = float(os.environ.get("DEAD_STORE_TIMEOUT_S", "2"))
    for kill_store in (False, True):
        print(json.dumps(one_case(kill_store, timeout_s)) + "\n", end="", flush=True)


if __name__ == "__main__":
    main()
