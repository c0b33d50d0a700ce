"""Standalone (torch and zephon only): a rank that calls ``checkpoint()`` after the round's
budget has run out fails the round on every rank, and the leader names it as missing.

Run: ``python -m torch.distributed.run --standalone --nproc-per-node 4 late_rank_round.py``.
G=4 ranks over C=6 lanes (contiguous: 2, 2, 1, 1), ``aggregate_store="torch://"``. Each rank
takes one batch per lane it owns (one global step), then:

1. every rank calls ``pipe.checkpoint()`` at once: the round completes (the control);
2. one more batch per lane, then ranks 0-2 call ``pipe.checkpoint()`` and the last rank calls
   it only after the others' calls have returned (a gloo barrier they enter afterwards), so
   it is later than ``aggregate_timeout_s`` by construction.

Each rank prints one JSON line: ``{"rank", "lanes", "on_time", "late"}`` with ``"ok"`` or the
error of each round. Options (environment): ``LATE_RANK_TIMEOUT_S`` (default 3),
``LATE_RANK_MTP`` (``1``: ``mtp_mode=True``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

CANONICAL_REPLICAS = 6


def build(world: int, rank: int, timeout_s: float, mtp: bool) -> Any:
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
            world_size=world,
            global_rank=rank,
            canonical_replicas=CANONICAL_REPLICAS,
            mapping_strategy="contiguous",
            run_id="late-rank",
            runner="inline",
            mtp_mode=mtp,
            aggregate_store="torch://",
            aggregate_timeout_s=timeout_s,
        )
    )


def attempt(pipe: Any) -> str:
    try:
        pipe.checkpoint()
    except Exception as exc:  # the round's outcome is what this script reports
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def main() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout_s = float(os.environ.get("LATE_RANK_TIMEOUT_S", "3"))
    mtp = os.environ.get("LATE_RANK_MTP") == "1"
    dist.init_process_group("gloo")
    pipe = build(world, rank, timeout_s, mtp)
    base, extra = divmod(CANONICAL_REPLICAS, world)
    owned = base + (1 if rank < extra else 0)
    late_rank = world - 1
    it = iter(pipe)
    lanes = [int(next(it).lane_ids[0]) for _ in range(owned)]
    on_time = attempt(pipe)
    lanes += [int(next(it).lane_ids[0]) for _ in range(owned)]
    if rank == late_rank:
        dist.barrier()  # the others' second checkpoint() has returned (failed) by now
        late = attempt(pipe)
    else:
        late = attempt(pipe)
        dist.barrier()
    print(
        json.dumps({"rank": rank, "lanes": lanes, "on_time": on_time, "late": late}) + "\n",
        end="",
        flush=True,
    )
    it.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
