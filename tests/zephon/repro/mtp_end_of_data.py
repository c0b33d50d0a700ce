"""Zephon 0.2, standalone (torch and zephon only, under torchrun, 2 ranks): with ``mtp_mode``
a rank cannot learn that its data ended until every other rank's iteration ends too.

Two lanes of unequal length (``exhausted_policy`` "stop"), one a rank. The ranks draw in
step and stop together as soon as any rank's data ends, the usual way to stop on uneven data
(an all-reduce of "my data ended" each step, as DDP's join does). Without ``mtp_mode`` the
short rank's ``next()`` raises ``StopIteration`` at once and both ranks stop. With
``mtp_mode`` (torchtitan-zephon's default) that ``next()`` blocks for
``aggregate_timeout_s`` and then raises ``RuntimeError: MTP checkpoint failed in
subprocess: ... Timed out ... waiting for checkpoint shards: Missing ranks=[1]``.

Cause, zephon 0.2.0: ``Pipeline._iter_mtp`` (``_internal/pipeline.py`` 1863-1877), when the
child's iteration completes and ``mtp_auto_checkpoint`` is on (its default, ``options.py``
147), calls ``MTPPipeline.checkpoint`` before the generator returns; the child answers with
``engine.state_dict()`` (``mtp.py`` 405-407), which ``Engine.state_dict`` turns into an
aggregation round of every rank (``engine.py`` 1875-1880, ``expected_ranks`` all of them), and
a failed round comes back as the RuntimeError (``mtp.py`` 765-767). The other rank is waiting
in the all-reduce for this rank's answer, so it joins no round. The in-process path
(``_iter_inline``) ends with no round.

Prints one JSON line a rank and case: ``{"run": "<case>-<rank>", "batches": n, "ended": ...,
"last_next_s": s}``; ``ended`` is "StopIteration", "a peer's data ended" or the error.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import torch
import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

TIMEOUT_S = float(os.environ.get("MTP_END_TIMEOUT_S", "6"))
CASES = ("inline", "mtp")


def build(case: str, rank: int, world: int) -> Any:
    """44 rows in chunks of 4 over 2 lanes of unequal length: rank 0's data ends first."""
    shards = {
        0: InMemoryShard([{"s": 0, "i": i} for i in range(40)]),
        1: InMemoryShard([{"s": 1, "i": i} for i in range(4)]),
    }
    source = StaticMixtureWorkSource(
        datasets=[Dataset.from_dict("a", shards)],
        mixture=MixtureSpec({"a": 1.0}),
        chunk_size=4,
        seed=7,
        shuffle_within_shard=False,
        exhausted_policy={"a": "stop"},
    )
    return (
        Pipeline(source)
        .batch(microbatch_size=2)
        .options(
            world_size=world,
            global_rank=rank,
            canonical_replicas=2,
            run_id=f"end-of-data-{case}",
            aggregate_store="torch://",
            aggregate_timeout_s=TIMEOUT_S,
            mtp_mode=case == "mtp",
        )
    )


def run(case: str, rank: int, world: int) -> dict[str, Any]:
    it = iter(build(case, rank, world))
    drawn, ended, last = 0, "", 0.0
    while True:
        began = time.monotonic()
        mine = 0
        try:
            next(it)
            drawn += 1
        except StopIteration:
            ended, mine = "StopIteration", 1
        except Exception as exc:  # what the trainer would see instead of the end
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            ended, mine = f"{type(exc).__name__}: {lines[0]} ... {lines[-1]}", 1
        last = time.monotonic() - began
        anyone = torch.tensor([mine])
        dist.all_reduce(anyone, op=dist.ReduceOp.MAX)
        if anyone.item():
            break
    it.close()
    return {
        "run": f"{case}-{rank}",
        "batches": drawn,
        "ended": ended or "a peer's data ended",
        "last_next_s": round(last, 2),
        "timeout_s": TIMEOUT_S,
    }


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for case in CASES:
        print(json.dumps(run(case, rank, world)) + "\n", end="", flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
