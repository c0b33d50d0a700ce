"""Standalone (torch, zephon and the standard library only): the leader's store link goes down
right before it announces a round and comes back once its ``checkpoint()`` call has failed;
the lockstep retry, over a whole link, fails on every rank with ``last_round_id mismatch
across shards``.

Run: ``python healed_link_poisons_retry.py``. G=2 ranks (threads, each with its own pipeline)
over C=2 lanes aggregate through a TCPStore this script serves on loopback. Rank 0's client
reaches it through :class:`Link`, a TCP forwarder of this script: ``cut`` closes every
connection it carries and closes each new one at once (a link that is gone), ``heal`` forwards
again. The only thing that times the cut is ``linked://``, a ``KVStore`` wrapping Zephon's own
``TorchKVStore`` (registered with ``register_kv_store``): right before rank 0's first write of
the round announcement (``.../round``) it cuts the link, then makes the write as it was.

Each rank takes one batch (its one lane: one step), then checkpoints in lockstep: every rank
calls ``pipe.checkpoint()`` together, rank 0 heals its link once its call has returned or
raised, the ranks agree whether all succeeded, and if not all call it again together (two
attempts). Observed (zephon 0.2.0), every run:

1. attempt 1 fails: on the leader with a ``TCPStore`` error of a later operation (the
   announcement's ``set`` returned: c10d's SET awaits no reply, so the write was lost on the
   cut link without an error); on the follower with "Timed out ... waiting for round id";
2. attempt 2 fails: on the leader with "cannot merge 2 aggregation state shards: -
   last_round_id mismatch across shards: {None, '<round 1>'}" (in either order), on the
   follower with "Checkpoint round <round 2> failed on leader: <that error>".

Cause, in Zephon 0.2.0's source:

- ``_internal/kvstore.py`` ``TorchKVStore._set`` (281-282) hands the write to c10d's
  ``TCPStore.set``, which sends it and returns; a failed operation discards the client
  (``_call``, 212-225) "so the next checkpoint reconnects" (the class docstring, 149-150),
  which it does: attempt 2 reaches the store.
- ``_internal/coordination.py`` ``RoundCoordinator._publish_new_round_id`` (435-439) sets
  ``last_round_id`` (438) once the announcement's write returned, and ``aggregate`` (520-530)
  again (527), before any follower has seen the round; ``_lead`` (532-595) publishes the
  failure and re-raises (576-583) and nothing resets ``last_round_id``. The follower never
  reads an announcement: ``_open_round_id`` (471-475) raises "waiting for round id" and its
  ``last_round_id`` stays None.
- ``_internal/engine.py`` ``Engine._merge_state_dicts`` (1958) collects each shard's
  ``last_round_id`` (1988-1990) and raises "cannot merge N aggregation state shards"
  (2001-2005): the mechanism of ``missed_round_poisons_next.py`` and
  ``failed_attempt_poisons_retry.py``, reached here by a transient link fault alone.

Prints one JSON line per rank: ``{"rank", "attempts": [...]}``, "ok" or the error of each
attempt it made. Option (environment): ``HEALED_LINK_TIMEOUT_S`` (default 2).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import sys
import threading
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon._internal.kvstore import KVStore, TorchKVStore, register_kv_store

SCHEME = "linked"
WORLD = 2
CANONICAL_REPLICAS = 2
ATTEMPTS = 2
JOIN_S = 60.0
"""A rank thread's bound, and any wait of this script's own: two rounds of a 2 s budget."""
CHUNK = 65536


class Link:
    """A TCP forwarder on loopback to ``upstream``: ``cut`` ends every connection and ends
    each new one at once; ``heal`` forwards again. Threads, all daemons."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.up = True
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                if not self.up:
                    client.close()
                    continue
                store = socket.create_connection(self.upstream)
                self._open += [client, store]
            for a, b in ((client, store), (store, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(CHUNK):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            self.up = False
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def heal(self) -> None:
        with self._lock:
            self.up = True

    def close(self) -> None:
        """Refuse new connections and end every one: at exit nothing is forwarded (the
        accepting thread, a daemon, stops with the interpreter), and a client that still
        connected then would wait on a link that answers nothing."""
        self.cut()
        self.server.close()


LINKS: dict[int, Link] = {}
"""Rank → the link its client reaches the store through (rank 0 only)."""


class LinkedStore(KVStore):
    """Zephon's TCPStore client; right before rank 0's first announcement write, its link is
    cut (see the module docstring). Everything else passes through as it is."""

    def __init__(self, inner: TorchKVStore, rank: int) -> None:
        self._inner = inner
        self._link = LINKS.get(rank)
        self.poll_interval_s = inner.poll_interval_s
        self.max_value_bytes = inner.max_value_bytes

    def check_ready(self) -> None:
        self._inner.check_ready()

    def get(self, key: str) -> bytes | None:
        return self._inner.get(key)

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        return self._inner.get_many(keys)

    def _set(self, key: str, value: bytes) -> None:
        if self._link is not None and key.endswith("/round"):
            self._link.cut()
            self._link = None  # once
        self._inner.set(key, value)

    def _set_if_absent(self, key: str, value: bytes) -> bytes:
        return self._inner.set_if_absent(key, value)

    def _append(self, key: str, value: bytes) -> None:
        self._inner.append(key, value)

    def exists(self, key: str) -> bool:
        return self._inner.exists(key)

    def delete(self, key: str) -> None:
        self._inner.delete(key)

    def wait(self, keys: list[str], timeout: float) -> bool:
        return self._inner.wait(keys, timeout)


def open_linked(uri: str, timeout_s: float) -> KVStore:
    """``linked://host:port/<rank>``."""
    parsed = urlparse(uri)
    inner = TorchKVStore(parsed.hostname, parsed.port, timeout_s=timeout_s)
    return LinkedStore(inner, int(parsed.path.strip("/")))


def build(rank: int, port: int, timeout_s: float) -> Any:
    rows = {s: InMemoryShard([{"i": i, "shard": s} for i in range(40)]) for s in range(2)}
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
            run_id="healed-link",
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
    timeout_s = float(os.environ.get("HEALED_LINK_TIMEOUT_S", "2"))
    register_kv_store(SCHEME, open_linked)
    server = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=JOIN_S)
    )
    LINKS[0] = Link(("127.0.0.1", server.port))
    ports = {0: LINKS[0].port, 1: server.port}
    together = threading.Barrier(WORLD, timeout=JOIN_S)
    succeeded: list[dict[int, bool]] = [{} for _ in range(ATTEMPTS)]
    attempts: dict[int, list[str]] = {r: [] for r in range(WORLD)}

    def rank_body(rank: int) -> None:
        try:
            pipe = build(rank, ports[rank], timeout_s)
            it = iter(pipe)
            next(it)  # one step: one batch on the rank's one lane
            for n in range(ATTEMPTS):
                together.wait()  # every rank calls checkpoint() at once
                attempts[rank].append(attempt(pipe))
                if rank == 0:
                    LINKS[0].heal()  # its call has returned: the link is whole again
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
    # The pipelines' finalizers delete their last rounds: let them run now, over the whole
    # link, rather than at the interpreter's exit, then close it.
    gc.collect()
    LINKS[0].close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
