"""Standalone (torch and zephon only): worker processes killed under a group's ranks.

Run: ``python -m torch.distributed.run --standalone --nproc-per-node 2 worker_death.py``.
With ``runner="process"`` (torchtitan-zephon's default) a rank's stages run in worker
processes; ``max_worker_retries`` (3 by default) has a watchdog respawn a worker killed by a
signal and re-dispatch its in-flight work (``_internal/runners/process.py``, its module
docstring and ``_on_worker_death``). The promise checked is a resume's: the batches every
rank draws after its workers died, and a checkpoint taken then, restored on one rank, continue
every lane's uninterrupted stream exactly.

Each rank draws 3 batches, SIGKILLs every worker process it has, draws on (in step with the
other rank) until every rank runs as many new workers as it killed (the respawn, its
in-flight work re-dispatched; ``ZEPHON_WATCHDOG_POLL_S``, read by Zephon, 5 s by default,
makes the watchdog look sooner), draws 12 more, checkpoints through ``torch://``
(torchrun's store) and draws 3 more. Rank 0 prints one JSON line:
``{"case", "killed", "respawned", "mismatches"}``: how many workers each rank killed and saw
replaced, and every lane whose batches, before or after the resume, differ from its
uninterrupted stream.
"""

from __future__ import annotations

import json
import os
import signal
import time
import warnings
from typing import Any

import torch
import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

CASE = "workers-killed-then-checkpoint"
C = 4
SHARDS = 40
"""Many small shards: fetching goes on while the ranks draw, so the workers have work."""
BEFORE, BETWEEN, AFTER = 3, 12, 3
"""Batches a rank draws before the kill, between it and the checkpoint, and after it."""
RESPAWN_S = 30.0
"""How long a rank waits for its watchdog to replace the killed workers."""


def build(world: int, rank: int, runner: str, run_id: str) -> Any:
    rows = {s: InMemoryShard([{"s": s, "i": i} for i in range(40)]) for s in range(SHARDS)}
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
            canonical_replicas=C,
            runner=runner,
            max_workers=2,
            run_id=run_id,
            aggregate_store="torch://",
            aggregate_timeout_s=30,
        )
    )


def draw(it: Any, n: int) -> list[tuple[int, list[list[int]]]]:
    return [
        (int(b.lane_ids[0]), [list(map(int, x)) for x in b.ids])
        for b in (next(it) for _ in range(n))
    ]


def read_proc(path: str) -> bytes:
    """A /proc file's bytes; b"" when its thread or process ended after it was listed (the
    pipeline's threads and children come and go while this looks)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def worker_processes() -> list[int]:
    """This process's children that multiprocessing spawned (not its resource tracker)."""
    me = os.getpid()
    found: list[int] = []
    for task in os.listdir(f"/proc/{me}/task"):
        found += [int(pid) for pid in read_proc(f"/proc/{me}/task/{task}/children").split()]
    return [pid for pid in found if b"spawn_main" in read_proc(f"/proc/{pid}/cmdline")]


def replacements(it: Any, victims: list[int]) -> tuple[int, list[tuple[int, Any]]]:
    """Draw on, in step with every rank, until every rank runs as many new workers as it
    killed (at most ``RESPAWN_S``): this rank's count, and the batches it drew meanwhile.
    A consumer that paused here instead could wedge Zephon's watchdog
    (``repro/paused_worker_death.py``), which this does not test; drawing in step keeps the
    ranks together for the checkpoint."""
    deadline = time.monotonic() + RESPAWN_S
    drawn: list[tuple[int, Any]] = []
    while True:
        new = len(set(worker_processes()) - set(victims))
        waiting = torch.tensor([int(new < len(victims) and time.monotonic() < deadline)])
        dist.all_reduce(waiting, op=dist.ReduceOp.MAX)
        if not waiting.item():
            return new, drawn
        drawn += draw(it, 1)


def by_lane(batches: list[tuple[int, Any]]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for lane, ids in batches:
        out.setdefault(lane, []).append(ids)
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    pipe = build(world, rank, "process", "workers")
    it = iter(pipe)
    drawn = draw(it, BEFORE)
    victims = worker_processes()
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    respawned, meanwhile = replacements(it, victims)
    drawn += meanwhile + draw(it, BETWEEN)
    ckpt = pipe.checkpoint()
    later = draw(it, AFTER)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, ((len(victims), respawned), drawn, later, ckpt))
    if rank == 0:
        consumed = by_lane([b for g in gathered for b in g[1]])
        continued = by_lane([b for g in gathered for b in g[2]])
        longest = max(len(b) for b in consumed.values()) + max(
            AFTER * world, *map(len, continued.values())
        )
        reference = by_lane(draw(iter(build(1, 0, "inline", "reference")), C * (longest + 1)))
        resumed_pipe = build(1, 0, "inline", "resumed")
        resumed_pipe.restore(gathered[0][3])
        resumed = by_lane(draw(iter(resumed_pipe), AFTER * world))
        mismatches = []
        for lane in range(C):
            n = len(consumed.get(lane, []))
            if consumed.get(lane) != reference[lane][:n]:
                mismatches.append(f"lane {lane}: the batches drawn before the checkpoint")
            for name, got in (("the group", continued), ("the resume", resumed)):
                part = got.get(lane, [])
                if not part or part != reference[lane][n : n + len(part)]:
                    mismatches.append(f"lane {lane}: the batches {name} drew after the checkpoint")
        killed = [g[0][0] for g in gathered]
        respawned = [g[0][1] for g in gathered]
        line = {"case": CASE, "killed": killed, "respawned": respawned, "mismatches": mismatches}
        print(json.dumps(line), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
