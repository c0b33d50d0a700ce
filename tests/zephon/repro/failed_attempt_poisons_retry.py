"""Standalone (torch, zephon and the standard library only): after an attempt that failed
because the leader's own store write of its state shard raised, the lockstep retry fails on
every rank with ``last_round_id mismatch across shards``.

Run: ``python failed_attempt_poisons_retry.py``. G=3 ranks (threads, each with its own
pipeline) over C=3 lanes aggregate through a TCPStore this script serves on loopback, reached
through ``flaky://``: a ``KVStore`` wrapping Zephon's own ``TorchKVStore`` (registered with
``register_kv_store``) that does two things only:

- rank 0's first write of a ``.../state/...`` key (its shard) raises, as a failing client
  would; Zephon's ``TorchKVStore._call`` raises the same way on any failed operation;
- a follower's first read of the round announcement (``.../round``) returns only once the
  leader's failure notice of that round is written. This pins one schedule: the leader fails
  microseconds after announcing, so followers that call together with it read the
  announcement after the notice (the schedule the explorer met); a follower that read it
  before would join the failed round and its retry would then agree with the leader's.

Each rank takes one batch (its one lane: one step), then checkpoints in lockstep: every rank
calls ``pipe.checkpoint()`` together, the ranks agree whether all succeeded, and if not all
call it again together (two attempts). Observed (zephon 0.2.0), every run:

1. attempt 1 fails: on the leader with the injected write error; on each follower with
   "Timed out ... waiting for round id" after its ``aggregate_timeout_s``: the only round
   announced is closed (its outcome key holds the failure notice), so it joins none;
2. attempt 2 fails: on the leader with "cannot merge 3 aggregation state shards: -
   last_round_id mismatch across shards: {'<round 1>', None}" (in either order), and on each
   follower with "Checkpoint round <round 2> failed on leader: <that error>".

Cause, in Zephon 0.2.0's source:

- ``_internal/coordination.py`` ``RoundCoordinator.aggregate`` (lines 520-530) sets
  ``self.last_round_id = round_id`` (line 527) as soon as a caller has a round id, before the
  round succeeds; the leader gets one at once (``_open_round_id``, 467-469;
  ``_publish_new_round_id``, 435-439, also sets it at 438). Nothing resets it when the round
  fails: ``_lead`` (532-595) publishes the failure notice and re-raises (576-583).
- ``KVCoordinator._failure_location`` (992-993) returns ``_result_location``, so
  ``_publish_failure`` (1092-1097) writes the notice to the round's ``outcome`` key, and a
  follower's ``_read_open_round_id`` (441-465) treats the announced round as closed (462-465);
  ``_wait_for_announcement`` (1065-1076) polls until the budget runs out and ``_open_round_id``
  (471-475) raises "waiting for round id". The follower's ``last_round_id`` stays None.
- ``_internal/engine.py`` ``Engine.state_dict`` (1860-1882) builds the local shard
  (``_state_dict_local``, 1753; ``last_round_id=self._last_round_id``, 1851) before calling
  ``aggregate`` (1875): the retry's shards carry round 1's id on the leader, None on the
  followers; ``Engine._merge_state_dicts`` (1958) collects them (1988-1990) and raises
  "cannot merge N aggregation state shards" (2001-2005). The protocol documents
  ``last_round_id`` as "Last joined round ID" (coordination.py, 74-75).

Prints one JSON line per rank: ``{"rank", "attempts": [...]}``, "ok" or the error of each
attempt it made. Option (environment): ``FAILED_ATTEMPT_TIMEOUT_S`` (default 2).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon._internal.kvstore import KVStore, TorchKVStore, register_kv_store

SCHEME = "flaky"
WORLD = 3
CANONICAL_REPLICAS = 3
ATTEMPTS = 2
JOIN_S = 60.0
"""A rank thread's bound, and any wait of this script's own: two rounds of a 2 s budget."""

NOTICE_WRITTEN = threading.Event()
"""Set once the leader has written a round's outcome key: the first attempt's failure notice."""


class FlakyStore(KVStore):
    """Zephon's TCPStore client; rank 0's first shard write raises, and a follower's first
    announcement read waits for the leader's failure notice (see the module docstring)."""

    def __init__(self, inner: TorchKVStore, rank: int) -> None:
        self._inner = inner
        self._rank = rank
        self._shard_write_failed = False
        self._announcement_read = rank == 0
        self.poll_interval_s = inner.poll_interval_s
        self.max_value_bytes = inner.max_value_bytes

    def check_ready(self) -> None:
        self._inner.check_ready()

    def get(self, key: str) -> bytes | None:
        if not self._announcement_read and key.endswith("/round"):
            self._announcement_read = True
            NOTICE_WRITTEN.wait(JOIN_S)
        return self._inner.get(key)

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        return self._inner.get_many(keys)

    def _set(self, key: str, value: bytes) -> None:
        if self._rank == 0 and "/state/" in key and not self._shard_write_failed:
            self._shard_write_failed = True
            raise RuntimeError(f"store write of {key!r} failed (injected)")
        self._inner.set(key, value)

    def _set_if_absent(self, key: str, value: bytes) -> bytes:
        stored = self._inner.set_if_absent(key, value)
        if self._rank == 0 and key.endswith("/outcome"):
            NOTICE_WRITTEN.set()
        return stored

    def _append(self, key: str, value: bytes) -> None:
        self._inner.append(key, value)

    def exists(self, key: str) -> bool:
        return self._inner.exists(key)

    def delete(self, key: str) -> None:
        self._inner.delete(key)

    def wait(self, keys: list[str], timeout: float) -> bool:
        return self._inner.wait(keys, timeout)


def open_flaky(uri: str, timeout_s: float) -> KVStore:
    """``flaky://host:port/<rank>``."""
    parsed = urlparse(uri)
    inner = TorchKVStore(parsed.hostname, parsed.port, timeout_s=timeout_s)
    return FlakyStore(inner, int(parsed.path.strip("/")))


def build(rank: int, port: int, timeout_s: float) -> Any:
    rows = {s: InMemoryShard([{"i": i, "shard": s} for i in range(40)]) for s in range(3)}
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
            canonical_replicas=CANONICAL_REPLICAS,
            run_id="failed-attempt",
            runner="inline",
            aggregate_store=f"{SCHEME}://127.0.0.1:{port}/{rank}",
            aggregate_timeout_s=timeout_s,
        )
    )


def attempt(pipe: Any) -> str:
    try:
        pipe.checkpoint()
    except Exception as exc:  # the attempt's outcome is what this script reports
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def main() -> int:
    timeout_s = float(os.environ.get("FAILED_ATTEMPT_TIMEOUT_S", "2"))
    register_kv_store(SCHEME, open_flaky)
    server = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=JOIN_S)
    )
    together = threading.Barrier(WORLD, timeout=JOIN_S)
    succeeded: list[dict[int, bool]] = [{} for _ in range(ATTEMPTS)]
    attempts: dict[int, list[str]] = {r: [] for r in range(WORLD)}

    def rank_body(rank: int) -> None:
        try:
            pipe = build(rank, server.port, timeout_s)
            it = iter(pipe)
            next(it)  # one step: one batch on the rank's one lane
            for n in range(ATTEMPTS):
                together.wait()  # every rank calls checkpoint() at once
                attempts[rank].append(attempt(pipe))
                succeeded[n][rank] = attempts[rank][-1] == "ok"
                together.wait()  # the lockstep agreement: did every rank succeed?
                if all(succeeded[n].values()):
                    break
            it.close()
        except Exception as exc:  # a broken barrier or a failed build: reported, not raised
            attempts[rank].append(f"script: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=rank_body, args=(r,), daemon=True) for r in range(WORLD)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S * (ATTEMPTS + 1))
    for r, t in enumerate(threads):
        if t.is_alive():
            attempts[r].append(f"script: no answer within {JOIN_S * (ATTEMPTS + 1):.0f} s")
        print(json.dumps({"rank": r, "attempts": attempts[r]}) + "\n", end="", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
