"""Standalone (torch, zephon and the standard library only): when the store dies while the
leader waits for its followers' acknowledgements, the leader's failing ``checkpoint()`` lasts
about one store connection timeout per acknowledgement it had already read.

Run: ``python dead_store_ack_cleanup.py``. For each world size G in ``WORLDS``, G ranks
(threads, each with its own pipeline, ``runner="inline"``) over C=G lanes aggregate through a
TCPStore served by a child process of this script, reached through ``observed://``: a
``KVStore`` wrapping Zephon's own ``TorchKVStore`` (registered with ``register_kv_store``)
that pins one schedule and times calls, and changes no outcome:

- the last follower's acknowledgement write waits until the store is dead (a slow rank);
- once the leader has read every other follower's acknowledgement, its next store call first
  kills the store process (SIGKILL), as a crashed store host would;
- the leader's store calls after the kill are timed.

Each rank takes one batch, then all call ``pipe.checkpoint()`` together with
``aggregate_timeout_s=T``. Observed (zephon 0.2.0, T = 1 s, 2 cores), every run: the leader's
first call after the kill fails at once (the closed connection), then it deletes each
acknowledgement it had read, one after the other, each delete opening a new connection to the
dead store that fails only after c10d's connect retries, 1.2-2.5 T: with G-2 acknowledgements
read the leader's call ends about 2 s (G=3) and 10-17 s (G=9) after the kill, while Zephon
documents the checkpoint's budget as shared by all its waits and each store operation as
bounded by T. At the default T = 180 s and 64 ranks that is hours.

Cause, in Zephon 0.2.0's source:

- ``_internal/coordination.py`` ``RoundCoordinator._wait_for_acks`` (597-637): the wait's
  ``finally`` (635-637) calls ``_delete_best_effort`` (380-384) on every acknowledgement read
  so far, also when the wait failed because the store did, and with no budget of its own;
- ``KVCoordinator._delete`` (1057-1061) is one store call per key;
- ``_internal/kvstore.py`` ``TorchKVStore._call`` (212-225) discards the client after any
  failed operation ("reconnect next time"), so each delete builds a new ``TCPStore`` client
  (``_client``, 227-240) whose connection set-up waits up to ``timeout=T`` (237), retried
  by c10d within that timeout.

Prints one JSON line per world size: ``{"world", "timeout_s", "acks_read", "leader"
(outcome, seconds after the kill), "calls_after_kill" ([operation, key kind, seconds], the
leader's), "followers" (outcomes)}``. Option (environment): ``DEAD_STORE_TIMEOUT_S``
(default 1).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon._internal.kvstore import KVStore, TorchKVStore, register_kv_store

SCHEME = "observed"
WORLDS = (3, 9)
JOIN_S = 120.0
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


def key_kind(key: str) -> str:
    """The part of a Zephon round key that says what it holds (``ack``, ``state``, ...)."""
    parts = key.split("/")
    return parts[-2] if len(parts) >= 2 and parts[-2] in ("ack", "state") else parts[-1]


class Schedule:
    """One world's store process and the schedule the ranks' store wrappers share."""

    def __init__(self, world: int, port: int) -> None:
        self.world = world
        self.server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.server.stdout is not None
        assert self.server.stdout.readline().strip() == "serving"
        self.acks_read: set[str] = set()
        self.dead = threading.Event()
        self.killed_at = 0.0
        self.calls_after_kill: list[tuple[str, str, float]] = []

    def kill(self) -> None:
        self.server.kill()
        self.server.wait(10)
        self.killed_at = time.monotonic()
        self.dead.set()

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.kill()
            self.server.wait(10)


SCHEDULES: dict[int, Schedule] = {}
"""By port: the ``observed://`` URI names the port, and each world has its own store."""


class ObservedStore(KVStore):
    """Zephon's TCPStore client under the schedule in the module docstring."""

    def __init__(self, inner: TorchKVStore, rank: int, schedule: Schedule) -> None:
        self._inner = inner
        self._rank = rank
        self._schedule = schedule
        self.poll_interval_s = inner.poll_interval_s
        self.max_value_bytes = inner.max_value_bytes

    def _timed(self, op: str, key: str, call: Callable[[], Any]) -> Any:
        if self._rank != 0:
            return call()
        s = self._schedule
        if not s.dead.is_set() and len(s.acks_read) == s.world - 2 and op == "wait":
            s.kill()  # the next poll after every acknowledgement but the slow one's was read
        began = time.monotonic()
        try:
            return call()
        finally:
            if s.dead.is_set():
                s.calls_after_kill.append((op, key_kind(key), round(time.monotonic() - began, 2)))

    def check_ready(self) -> None:
        self._inner.check_ready()

    def get(self, key: str) -> bytes | None:
        return self._timed("get", key, lambda: self._inner.get(key))

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        return self._timed("get_many", keys[0] if keys else "", lambda: self._inner.get_many(keys))

    def _set(self, key: str, value: bytes) -> None:
        if self._rank == self._schedule.world - 1 and "/ack/" in key:
            self._schedule.dead.wait(JOIN_S)  # the slow follower acknowledges after the kill
        self._timed("set", key, lambda: self._inner.set(key, value))

    def _set_if_absent(self, key: str, value: bytes) -> bytes:
        return self._timed("set_if_absent", key, lambda: self._inner.set_if_absent(key, value))

    def _append(self, key: str, value: bytes) -> None:
        self._timed("append", key, lambda: self._inner.append(key, value))

    def exists(self, key: str) -> bool:
        found = self._timed("check", key, lambda: self._inner.exists(key))
        if self._rank == 0 and found and "/ack/" in key:
            self._schedule.acks_read.add(key)
        return found

    def delete(self, key: str) -> None:
        self._timed("delete", key, lambda: self._inner.delete(key))

    def wait(self, keys: list[str], timeout: float) -> bool:
        return self._timed("wait", keys[0] if keys else "", lambda: self._inner.wait(keys, timeout))


def open_observed(uri: str, timeout_s: float) -> KVStore:
    """``observed://host:port/<rank>``."""
    parsed = urlparse(uri)
    assert parsed.port is not None
    inner = TorchKVStore(parsed.hostname, parsed.port, timeout_s=timeout_s)
    return ObservedStore(inner, int(parsed.path.strip("/")), SCHEDULES[parsed.port])


def build(rank: int, world: int, port: int, timeout_s: float) -> Any:
    rows = {s: InMemoryShard([{"i": i, "shard": s} for i in range(40)]) for s in range(world)}
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
            world_size=world,
            global_rank=rank,
            canonical_replicas=world,
            run_id=f"dead-store-{world}",
            runner="inline",
            aggregate_store=f"{SCHEME}://127.0.0.1:{port}/{rank}",
            aggregate_timeout_s=timeout_s,
        )
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_world(world: int, timeout_s: float) -> dict[str, Any]:
    port = free_port()
    schedule = SCHEDULES[port] = Schedule(world, port)
    together = threading.Barrier(world, timeout=JOIN_S)
    outcomes: dict[int, tuple[str, float]] = {}

    def rank_body(rank: int) -> None:
        try:
            pipe = build(rank, world, port, timeout_s)
            it = iter(pipe)
            next(it)  # one step: one batch on the rank's one lane
            together.wait()  # every rank calls checkpoint() at once
            try:
                pipe.checkpoint()
                outcome = "ok"
            except Exception as exc:  # the call's outcome is what this script reports
                outcome = f"{type(exc).__name__}: {exc}"[:300]
            outcomes[rank] = (outcome, time.monotonic())
        except Exception as exc:  # a broken barrier or a failed build: reported, not raised
            outcomes[rank] = (f"script: {type(exc).__name__}: {exc}", time.monotonic())

    threads = [threading.Thread(target=rank_body, args=(r,), daemon=True) for r in range(world)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(JOIN_S)
    finally:
        schedule.close()
    leader, ended = outcomes.get(0, (f"script: no answer within {JOIN_S:.0f} s", 0.0))
    return {
        "world": world,
        "timeout_s": timeout_s,
        "acks_read": len(schedule.acks_read),
        "leader": {
            "outcome": leader,
            "after_kill_s": round(ended - schedule.killed_at, 2) if schedule.killed_at else None,
        },
        "calls_after_kill": schedule.calls_after_kill,
        "followers": [outcomes.get(r, ("no answer", 0.0))[0] for r in range(1, world)],
    }


def main() -> int:
    timeout_s = float(os.environ.get("DEAD_STORE_TIMEOUT_S", "1"))
    register_kv_store(SCHEME, open_observed)
    for world in WORLDS:
        print(json.dumps(one_world(world, timeout_s)) + "\n", end="", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
