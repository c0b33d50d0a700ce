"""Standalone (torch and zephon only): a relaunch that restores the same checkpoint as a
launch whose leader died inside a checkpoint round, under the same ``run_id``, works in that
launch's namespace; its follower joins the dead round and times out waiting for its outcome,
and the relaunch's first checkpoint fails on every rank.

Run: ``python dead_round_meets_relaunch.py``. Ranks are threads of this process, except the
dead launch's leaders, which live in one child process of this script that is SIGKILLed
inside their rounds (as the OOM killer or a lost node ends a rank). One TCPStore hosted here
on 127.0.0.1 is the ``aggregate_store`` of every launch (as torchrun's agent store outlives a
``--max-restarts`` restart). G=2 ranks over C=2 lanes, ``runner="inline"``. Nothing waits on
the clock for ordering: every wait is for a store key or an event, bounded by ``JOIN_S``.

1. launch A: both ranks draw a batch and call ``checkpoint()`` together: ckpt0;
2. the dead launch, once per case under its own ``run_id``: its leader (rank 0) restores
   ckpt0, draws a batch and calls ``checkpoint()``: it announces a round and publishes its
   shard, then waits for its follower, which never comes. Once every case's round is
   announced with the leader's shard in it, the child is SIGKILLed: each round is left
   announced, with no outcome (no failure notice: its leader is dead);
3. the relaunch: both ranks restore ckpt0 again, draw a batch and call ``checkpoint()`` with
   ``aggregate_timeout_s=TIMEOUT_S``; the follower's first look at the announcement comes
   before its leader's call (the unlucky order of a restart's race, forced here by an event
   that an observer of ``RoundCoordinator._read_open_round_id`` sets; the outcome unchanged).

Cases: ``same-run-id`` (the relaunch under the dead launch's ``run_id``, as a job with one
fixed run id restarts): the follower joins the dead round and raises ``Timed out ... waiting
for merged checkpoint at zephon/<run_id>-1/<dead round id>/outcome``, and the relaunch's
leader, whose own round the follower never joined, raises ``Missing ranks=[1]``. Controls:
``run-id-per-generation`` (the relaunch's ``run_id`` carries a token of its own process-group
generation, as a launcher-aware adapter would set it): both ranks complete; ``cleared`` (the
operator step: the dead round's announcement deleted before the relaunch, the manual cleanup
``RoundCoordinator.cleanup`` leaves to the user): both ranks complete.

Why, in zephon 0.2.0 ``_internal/coordination.py``: the namespace is
``zephon/{run_id}-{reload_count}`` (``RoundCoordinator._scoped_run_id``, lines 371-378), and
restoring sets ``reload_count`` to the saved count plus one (engine.py lines 2206-2208), so the
dead launch and the relaunch share ``zephon/<run_id>-1``. A follower joins the announced round
unless its result exists (``_read_open_round_id``, lines 441-465; only an announcement older
than ``aggregate_timeout_s + 30`` s is skipped, line 448), publishes its shard and waits for the
outcome (``_follow``, lines 639-652). A leader that dies in ``_lead`` (lines 532-595) never
publishes a result or a failure notice. ``KVCoordinator``'s docstring (lines 908-914):
"Restoring the same checkpoint twice reuses that namespace, so isolation between such attempts
is best effort, as with ``aggregate_dir``"; ``RoundCoordinator.cleanup`` (lines 660-667) leaves
failed-round artifacts to "manual cleanup once every participant has stopped".

Prints one JSON line per case: ``{"case", "run_id", "dead_round", "dead_age_s", "follower",
"follower_s", "leader", "leader_s"}``: the relaunch's run id, the round id the dead leader
announced, that announcement's age when the relaunch began, and each relaunched rank's
outcome ("ok" or the error) and how long its ``checkpoint()`` took.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon._internal.coordination import RoundCoordinator

WORLD = 2
CANONICAL_REPLICAS = 2
TIMEOUT_S = 2.0
"""The relaunch's ``aggregate_timeout_s``: what it loses to the dead round (180 s by default)."""
DEAD_TIMEOUT_S = 120.0
"""The dead launch's budget: its leaders are killed long before it runs out."""
JOIN_S = 120.0
"""A bound on every wait of this script's own (a rank thread, a key, the child)."""
RUN_ID = "dead-round"
CASES = ("same-run-id", "run-id-per-generation", "cleared")
DEAD = "--dead-leaders"
"""The child's argument: be the dead launch's leaders."""


def build(rank: int, run_id: str, port: int, timeout_s: float) -> Any:
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
            run_id=run_id,
            runner="inline",
            aggregate_store=f"torch://127.0.0.1:{port}",
            aggregate_timeout_s=timeout_s,
        )
    )


def restored(rank: int, run_id: str, port: int, timeout_s: float, ckpt: dict[str, Any]) -> Any:
    """A fresh pipeline restored from ``ckpt``, having drawn a batch, and its iterator."""
    pipe = build(rank, run_id, port, timeout_s)
    pipe.restore(copy.deepcopy(ckpt))
    it = iter(pipe)
    next(it)
    return pipe, it


def announcement(run_id: str) -> str:
    """The key of the relaunch's namespace that names its open round: ckpt0 was taken at
    reload_count 0, so restoring it makes 1."""
    return f"zephon/{run_id}-1/round"


def client(port: int) -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=JOIN_S))


def dead_leaders(ckpt_path: str, port: int, run_ids: list[str]) -> None:
    """The child: one leader per run id, each inside its round; prints the round ids once
    every round is announced with the leader's shard in it, then waits to be killed."""
    with open(ckpt_path, "rb") as f:
        ckpt = pickle.load(f)
    held = []
    for run_id in run_ids:
        pipe, it = restored(0, run_id, port, DEAD_TIMEOUT_S, ckpt)
        held.append((pipe, it))
        threading.Thread(target=pipe.checkpoint, daemon=True).start()
    store = client(port)
    rounds: dict[str, str] = {}
    for run_id in run_ids:
        store.wait([announcement(run_id)])
        rid = str(json.loads(store.get(announcement(run_id)))["round"])
        store.wait([f"zephon/{run_id}-1/{rid}/participants"])  # appended after the shard
        rounds[run_id] = rid
    print(json.dumps({"dead": rounds}) + "\n", end="", flush=True)
    sys.stdin.readline()  # killed here; returns only if the parent went away


FIRST_LOOK: dict[str, threading.Event] = {}
"""Per run id: set once the relaunched follower first read the announcement."""
_read_open_round_id = RoundCoordinator._read_open_round_id


def observed_read(self: RoundCoordinator) -> str | None:
    try:
        return _read_open_round_id(self)
    finally:
        if self._global_rank == 1:
            event = FIRST_LOOK.get(self._opts.run_id)
            if event is not None:
                event.set()


RoundCoordinator._read_open_round_id = observed_read  # type: ignore[method-assign]


def attempt(call: Callable[[], Any]) -> tuple[str, float]:
    began = time.monotonic()
    try:
        call()
    except Exception as exc:  # the outcome is what this script reports
        return f"{type(exc).__name__}: {exc}", round(time.monotonic() - began, 2)
    return "ok", round(time.monotonic() - began, 2)


def on_ranks(fn: Callable[[int], Any]) -> dict[int, Any]:
    """``fn(rank)`` on every rank's thread at once; an exception becomes its text."""
    out: dict[int, Any] = {}

    def body(rank: int) -> None:
        try:
            out[rank] = fn(rank)
        except Exception as exc:  # the outcome is what this script reports
            out[rank] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(WORLD)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    return {r: out.get(r, f"no answer within {JOIN_S:.0f} s") for r in range(WORLD)}


def relaunch(
    case: str,
    run_id: str,
    dead_run_id: str,
    store: dist.TCPStore,
    port: int,
    ckpt: dict[str, Any],
) -> dict[str, Any]:
    """Both ranks restore ``ckpt`` under ``run_id`` and checkpoint; the leader calls only
    after the follower's first look at the announcement."""
    key = announcement(dead_run_id)
    raw = store.get(key) if store.check([key]) else None
    age = None if raw is None else round(time.time() - float(json.loads(raw)["ts"]), 2)
    looked = FIRST_LOOK.setdefault(run_id, threading.Event())
    ranks = [restored(r, run_id, port, TIMEOUT_S, ckpt) for r in range(WORLD)]

    def call(rank: int) -> tuple[str, float]:
        if rank == 0 and not looked.wait(JOIN_S):
            return f"the follower never read the announcement within {JOIN_S:.0f} s", 0.0
        return attempt(ranks[rank][0].checkpoint)

    outcomes = on_ranks(call)
    for _, it in ranks:
        it.close()
    (leader, leader_s), (follower, follower_s) = outcomes[0], outcomes[1]
    return {
        "case": case,
        "run_id": run_id,
        "dead_age_s": age,
        "follower": follower,
        "follower_s": follower_s,
        "leader": leader,
        "leader_s": leader_s,
    }


def main() -> None:
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    port = store.port

    def take(rank: int) -> dict[str, Any]:
        pipe = build(rank, RUN_ID, port, TIMEOUT_S)
        it = iter(pipe)
        next(it)
        try:
            return dict(pipe.checkpoint())
        finally:
            it.close()

    taken = on_ranks(take)
    if not all(isinstance(c, dict) for c in taken.values()):
        print(json.dumps({"launch_a": taken}) + "\n", end="", flush=True)
        raise SystemExit(1)
    ckpt0 = taken[0]
    dead_run_ids = [f"{RUN_ID}-{case}" for case in CASES]

    with tempfile.TemporaryDirectory() as work:
        ckpt_path = os.path.join(work, "ckpt0.pickle")
        with open(ckpt_path, "wb") as f:
            pickle.dump(ckpt0, f)
        child = subprocess.Popen(
            [sys.executable, __file__, DEAD, ckpt_path, str(port), *dead_run_ids],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            line = child.stdout.readline()  # the child's own store waits bound this
            if not line.startswith('{"dead"'):
                raise SystemExit(f"the dead launch's leaders never announced: {line!r}")
            rounds: dict[str, str] = json.loads(line)["dead"]
        finally:
            child.kill()  # SIGKILL: each leader dies inside its round
            child.wait(JOIN_S)

    for case in CASES:
        dead_run_id = f"{RUN_ID}-{case}"
        run_id = dead_run_id
        if case == "run-id-per-generation":
            run_id = f"{dead_run_id}-r1-{uuid.uuid4().hex[:12]}"
        elif case == "cleared":
            store.delete_key(announcement(dead_run_id))
        line = relaunch(case, run_id, dead_run_id, store, port, ckpt0)
        line["dead_round"] = rounds[dead_run_id]
        print(json.dumps(line) + "\n", end="", flush=True)
    # The pipelines' finalizers clean up in the store: collect them while it is served.
    gc.collect()


if __name__ == "__main__":
    if sys.argv[1:2] == [DEAD]:
        dead_leaders(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        main()
