"""Standalone (torch and zephon only): with ``aggregate_dir``, a relaunch that restores the
same checkpoint as a launch whose checkpoint round failed joins that dead launch's round, and
its follower's ``checkpoint()`` raises the old launch's failure notice at once.

Run: ``python failed_round_open_in_dir.py``. Ranks are threads of this process (FileCoordinator
needs no process group; the control's TCPStore is hosted here on 127.0.0.1). G=2 ranks over C=2
lanes, one ``run_id``, ``aggregate_timeout_s=1``, ``runner="inline"``. Each case runs three
launches in order, each with fresh pipelines; nothing waits on the clock for ordering:

1. launch A: both ranks draw a batch and call ``checkpoint()`` together: ckpt0 (control: ok);
2. launch B: both ranks restore ckpt0 and draw a batch; only the leader (rank 0) calls
   ``checkpoint()``: it fails after the budget (``Missing ranks=[1]``) and publishes its
   failure notice. The round id it announced is read back from the announcement;
3. launch C: both ranks restore ckpt0 again and draw a batch; rank 1 (a follower) calls
   ``checkpoint()`` while rank 0 has not called at all, so no round of launch C exists.

Cases: ``dir`` (``aggregate_dir``, launch C with launch B's ``run_id``): the follower joins
launch B's round and raises at once ``Checkpoint round <B's round id> failed on leader:
<B's leader error>``. Controls: ``store`` (``aggregate_store`` on a TCPStore): the follower
skips B's round and times out waiting for a round id; ``dir-new-run-id`` (``aggregate_dir``,
launch C under another ``run_id``): the same.

Cause, in zephon 0.2.0 ``_internal/coordination.py``: restoring sets ``reload_count`` to the
saved count plus one (engine.py ``Engine.load_state_dict``, lines 2206-2208), and the rounds
live under ``{run_id}-{reload_count}`` (``_scoped_run_id``, lines 371-378;
``FileCoordinator.agg_dir``, lines 743-780, the path at 758-761), so launches B and C share one
directory. A follower joins the announced round unless its result exists
(``RoundCoordinator._read_open_round_id``, lines 441-465: the test is
``_exists(self._result_location(rid))``, line 463; only an announcement older than
``aggregate_timeout_s + 30`` is skipped, line 448). ``FileCoordinator._failure_location``
(lines 808-809) is a separate ``failed_<rid>.txt``, and the announcement ``round.current`` is
deleted (``_close_round``, lines 868-869) only on the success path of ``_lead`` (line 571), so
a failed round stays open; the follower publishes its shard and ``_wait_for_outcome``
(lines 882-896) raises the stale notice (lines 889-893). ``KVCoordinator._failure_location``
(lines 992-993) returns ``_result_location``: the notice is the round's outcome, so there
the follower skips the failed round. Zephon's note that isolation between attempts restoring
the same checkpoint is "best effort, as with ``aggregate_dir``" (``KVCoordinator`` docstring,
lines 911-913) is met by the store here; the directory treats a round whose failure it
recorded as still open.

Prints one JSON line per case: ``{"case", "a", "b_leader", "b_round", "b_left",
"c_follower", "c_follower_s"}``: launch A's outcome per rank, launch B's leader outcome, the
round id it announced, what launch B left: the files of the shared directory, or the store's
``round`` and ``<round id>/outcome`` keys (those present, under ``zephon/{run_id}-1/``), launch
C's follower outcome ("ok" or the error) and how long its call took.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

WORLD = 2
CANONICAL_REPLICAS = 2
TIMEOUT_S = 1.0
RUN_ID = "failed-round"
JOIN_S = 120.0
"""A rank thread's bound; a round waits at most ``TIMEOUT_S``."""


def build(rank: int, run_id: str, coordination: dict[str, Any]) -> Any:
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
            aggregate_timeout_s=TIMEOUT_S,
            **coordination,
        )
    )


def attempt(call: Callable[[], Any]) -> str:
    try:
        call()
    except Exception as exc:  # the outcome is what this script reports
        return f"{type(exc).__name__}: {exc}"
    return "ok"


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


def launch(
    run_id: str, coordination: dict[str, Any], ckpt: dict[str, Any]
) -> tuple[list[Any], list[Any]]:
    """Fresh pipelines on every rank, restored from ``ckpt``, each having drawn a batch."""
    pipes = [build(r, run_id, coordination) for r in range(WORLD)]
    iters = []
    for pipe in pipes:
        pipe.restore(copy.deepcopy(ckpt))
        iters.append(iter(pipe))
        next(iters[-1])
    return pipes, iters


def run_case(
    case: str,
    coordination: dict[str, Any],
    relaunch_run_id: str,
    announced: Callable[[], str | None],
    left: Callable[[], list[str]],
) -> None:
    # Launch A: both ranks checkpoint together.
    def take(rank: int) -> dict[str, Any]:
        pipe = build(rank, RUN_ID, coordination)
        it = iter(pipe)
        next(it)
        try:
            return dict(pipe.checkpoint())
        finally:
            it.close()

    taken = on_ranks(take)
    a = {r: "ok" if isinstance(c, dict) else c for r, c in taken.items()}
    line: dict[str, Any] = {"case": case, "a": a}
    if a != {r: "ok" for r in range(WORLD)}:
        print(json.dumps(line) + "\n", end="", flush=True)
        return
    ckpt0 = taken[0]

    # Launch B: only the leader calls; its round fails on the missing follower.
    pipes, iters = launch(RUN_ID, coordination, ckpt0)
    line["b_leader"] = attempt(pipes[0].checkpoint)
    line["b_round"] = announced()
    line["b_left"] = left()
    for it in iters:
        it.close()

    # Launch C: the follower calls while the leader has not called at all.
    pipes, iters = launch(relaunch_run_id, coordination, ckpt0)
    start = time.monotonic()
    line["c_follower"] = attempt(pipes[1].checkpoint)
    line["c_follower_s"] = round(time.monotonic() - start, 2)
    for it in iters:
        it.close()
    print(json.dumps(line) + "\n", end="", flush=True)


def main() -> None:
    relaunch_scope = f"{RUN_ID}-1"  # ckpt0 was taken at reload_count 0; restoring makes it 1

    for case, relaunch_run_id in (("dir", RUN_ID), ("dir-new-run-id", f"{RUN_ID}-relaunch")):
        with tempfile.TemporaryDirectory() as agg:
            agg_dir = os.path.join(agg, relaunch_scope, ".zephon_agg")

            def announced_in_dir(agg_dir: str = agg_dir) -> str | None:
                path = os.path.join(agg_dir, "round.current")
                if not os.path.exists(path):
                    return None
                with open(path, encoding="utf-8") as f:
                    return f.read().strip()

            def files_in_dir(agg_dir: str = agg_dir) -> list[str]:
                return sorted(os.listdir(agg_dir)) if os.path.isdir(agg_dir) else []

            run_case(case, {"aggregate_dir": agg}, relaunch_run_id, announced_in_dir, files_in_dir)

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    key = f"zephon/{relaunch_scope}/round"

    def announced_in_store() -> str | None:
        if not store.check([key]):
            return None
        return str(json.loads(store.get(key))["round"])

    def keys_in_store() -> list[str]:
        rid = announced_in_store()
        names = ["round"] + ([f"{rid}/outcome"] if rid is not None else [])
        return [n for n in names if store.check([f"zephon/{relaunch_scope}/{n}"])]

    run_case(
        "store",
        {"aggregate_store": f"torch://127.0.0.1:{store.port}"},
        RUN_ID,
        announced_in_store,
        keys_in_store,
    )


if __name__ == "__main__":
    main()
