"""Standalone (torch and zephon only): after a round one rank never joined, the next
checkpoint fails on every rank although all of them call it at once; the one after succeeds.

Run: ``python -m torch.distributed.run --standalone --nproc-per-node 2
missed_round_poisons_next.py``. G=2 ranks over C=2 lanes, ``aggregate_store="torch://"``.
Each rank takes one batch per lane it owns before each of four rounds:

1. both ranks call ``pipe.checkpoint()`` together (a gloo barrier first): completes (control);
2. rank 0 calls it; rank 1 calls it only after rank 0's call has returned (a barrier rank 0
   enters afterwards), so later than ``aggregate_timeout_s``: fails, as Zephon documents.
   The leader set ``last_round_id`` to the round it opened; rank 1, finding that round
   closed by its failure notice, waits out its budget for another and joins none;
3. both ranks call it together again: fails, the leader's merge refusing
   ``last_round_id mismatch across shards`` (engine.py, ``Engine._merge_state_dicts``), each rank's
   shard carrying the id of the last round *it* joined;
4. both together: completes (both joined round 3).

Each rank prints one JSON line: ``{"rank", "rounds": [...]}``, "ok" or the error of each
round. Option (environment): ``MISSED_ROUND_TIMEOUT_S`` (default 2).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

CANONICAL_REPLICAS = 2


def build(world: int, rank: int, timeout_s: float) -> Any:
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
            run_id="missed-round",
            runner="inline",
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
    timeout_s = float(os.environ.get("MISSED_ROUND_TIMEOUT_S", "2"))
    dist.init_process_group("gloo")
    pipe = build(world, rank, timeout_s)
    it = iter(pipe)
    rounds = []
    for n in range(4):
        next(it)  # one batch per lane: each rank owns one lane
        if n == 1:  # rank 1 late: it calls only after rank 0's call has returned
            if rank == 0:
                rounds.append(attempt(pipe))
                dist.barrier()
            else:
                dist.barrier()
                rounds.append(attempt(pipe))
        else:
            dist.barrier()
            rounds.append(attempt(pipe))
    print(json.dumps({"rank": rank, "rounds": rounds}) + "\n", end="", flush=True)
    it.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
