"""Standalone (torch and zephon only): a checkpoint one Zephon version took, resumed by another.

A trainer that upgrades Zephon resumes a run whose checkpoint the older version wrote, and
torchtitan-zephon's recipes switch from ``aggregate_dir`` to ``aggregate_store`` with 0.2.
``Pipeline.restore`` migrates older component states (``_internal/checkpoint/
_migrations.py``: 0.1.0 writes ``work_chunk`` v2, 0.2.0 reads v3); the promise checked is
the one of any resume: every lane's batches continue exactly where the checkpoint left them,
so the global batches after a boundary checkpoint are identical, on any world size.

Two runs, each under the Zephon on its path:

- ``take OUT``: 2 ranks (threads) aggregate through one ``aggregate_dir``, checkpoint at
  their 3rd batch (mid-window: a rank's two lanes are at 2 and 1 batches) and at their 4th
  (a window boundary), then draw on; every lane's whole stream and both checkpoints go to
  ``OUT`` (pickle).
- ``resume OUT``: restores each checkpoint onto 1, 2 and 4 ranks through ``aggregate_dir``,
  and onto 1 rank through a ``torch://host:port`` store that checkpoints again (now in its
  own version's format, aggregated through the store) and resumes onto 2 ranks. Prints one
  JSON line per case: ``{"case", "taken_by", "resumed_by", "lanes", "mismatches"}``, where a
  mismatch names a lane whose batches after the resume differ from the taken run's.
- ``resume-group OUT``, under torchrun: the ranks resume each checkpoint through
  ``torch://``, torchrun's own store (the recipes' default in 0.2), checkpoint through it
  and resume that again; rank 0 prints the same line for the group.
"""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch.distributed as dist
import zephon
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

CANONICAL_REPLICAS = 4
TAKE_WORLD = 2
CHECKPOINT_AT = {"mid-window": 3, "boundary": 4}
"""Batches a rank of the taken run had drawn at each checkpoint."""
DRAWN = 16
"""Batches a rank of the taken run draws in all: every lane's stream outlasts each resume."""
RESUME_DRAWS = 8
"""Batches every resumed group draws in all (a rank draws its share)."""
JOIN_S = 60.0
"""A rank thread's bound; an aggregation round waits at most ``aggregate_timeout_s`` (10)."""

Lanes = dict[int, list[list[list[int]]]]
"""A lane's batches in order, each batch its samples' ``(dataset, shard, index)`` ids."""


def build(world: int, rank: int, run_id: str, **aggregate: str) -> Any:
    datasets = [
        Dataset.from_dict(
            name,
            {s: InMemoryShard([{"n": name, "s": s, "i": i} for i in range(n)]) for s in range(3)},
        )
        for name, n in (("a", 200), ("b", 100))
    ]
    source = StaticMixtureWorkSource(
        datasets=datasets,
        mixture=MixtureSpec({"a": 0.6, "b": 0.4}),
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
            run_id=run_id,
            aggregate_timeout_s=10,
            **aggregate,
        )
    )


def on_ranks(world: int, fn: Callable[[int], Any]) -> dict[int, Any]:
    """``fn(rank)`` on ``world`` threads at once; raises the first rank's exception."""
    out: dict[int, Any] = {}
    failed: list[BaseException] = []

    def body(rank: int) -> None:
        try:
            out[rank] = fn(rank)
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    if failed:
        raise failed[0]
    if len(out) != world:
        raise TimeoutError(f"{world - len(out)} rank thread(s) still running after {JOIN_S} s")
    return out


def lanes_of(batches: list[Any]) -> Lanes:
    lanes: Lanes = {}
    for b in batches:
        lanes.setdefault(int(b.lane_ids[0]), []).append([list(map(int, x)) for x in b.ids])
    return lanes


def merged(parts: list[Lanes]) -> Lanes:
    out: Lanes = {}
    for part in parts:
        for lane, batches in part.items():
            out.setdefault(lane, []).extend(batches)
    return out


def take(out: str) -> None:
    folder = tempfile.mkdtemp()

    def rank(r: int) -> tuple[dict[str, Any], list[Any], dict[str, Lanes]]:
        pipe = build(TAKE_WORLD, r, "taken", aggregate_dir=folder)
        it = iter(pipe)
        drawn: list[Any] = []
        ckpts: dict[str, Any] = {}
        at: dict[str, Lanes] = {}
        for n in range(1, DRAWN + 1):
            drawn.append(next(it))
            for name, step in CHECKPOINT_AT.items():
                if n == step:
                    ckpts[name] = pipe.checkpoint()
                    at[name] = lanes_of(drawn)
        return ckpts, drawn, at

    ranks = on_ranks(TAKE_WORLD, rank)
    saved = {
        "version": zephon.__version__,
        "checkpoints": ranks[0][0],
        "streams": merged([lanes_of(ranks[r][1]) for r in ranks]),
        "counts": {
            name: {lane: len(b) for lane, b in merged([ranks[r][2][name] for r in ranks]).items()}
            for name in CHECKPOINT_AT
        },
    }
    with open(out, "wb") as f:
        pickle.dump(saved, f)
    print(json.dumps({"took": zephon.__version__, "checkpoints": sorted(CHECKPOINT_AT)}))


def draw(world: int, ckpt: dict[str, Any], run_id: str, n: int, **aggregate: str) -> Lanes:
    """Restore ``ckpt`` onto ``world`` ranks and draw ``n`` batches over them."""

    def rank(r: int) -> Lanes:
        pipe = build(world, r, run_id, **aggregate)
        pipe.restore(ckpt)
        it = iter(pipe)
        return lanes_of([next(it) for _ in range(n // world)])

    return merged(list(on_ranks(world, rank).values()))


def through_store(ckpt: dict[str, Any], uri: str) -> Lanes:
    """1 rank resumes through the store, checkpoints at a boundary, and 2 ranks resume that."""

    def rank(r: int) -> tuple[Lanes, dict[str, Any]]:
        pipe = build(1, r, "through-store", aggregate_store=uri)
        pipe.restore(ckpt)
        it = iter(pipe)
        first = lanes_of([next(it) for _ in range(CANONICAL_REPLICAS)])
        return first, pipe.checkpoint()

    first, again = on_ranks(1, rank)[0]
    return merged([first, draw(2, again, "through-store-again", RESUME_DRAWS, aggregate_store=uri)])


def mismatches(saved: dict[str, Any], name: str, got: Lanes) -> list[str]:
    out = []
    for lane in range(CANONICAL_REPLICAS):
        start = saved["counts"][name].get(lane, 0)
        batches = got.get(lane, [])
        expected = saved["streams"][lane][start : start + len(batches)]
        if not batches:
            out.append(f"lane {lane}: no batch after the resume")
        elif batches != expected:
            first = next(
                (i for i, (a, b) in enumerate(zip(batches, expected, strict=False)) if a != b),
                len(expected),
            )
            out.append(f"lane {lane}: batch {start + first} differs")
    return out


def report(case: str, saved: dict[str, Any], name: str, got: Lanes) -> None:
    """Print the case's line: who took and who resumed checkpoint ``name``, and its mismatches."""
    line = {
        "case": case,
        "taken_by": saved["version"],
        "resumed_by": zephon.__version__,
        "lanes": sorted(got),
        "mismatches": mismatches(saved, name, got),
    }
    print(json.dumps(line), flush=True)


def resumed(ckpt: dict[str, Any], case: str, how: str, uri: str) -> Lanes:
    """The lanes ``how`` resumes ``ckpt`` to: ``dir-W`` on W ranks, or ``store-1-then-2``."""
    if how == "store-1-then-2":
        return through_store(ckpt, uri)
    world = int(how.removeprefix("dir-"))
    return draw(world, ckpt, case, RESUME_DRAWS, aggregate_dir=tempfile.mkdtemp())


def resume(path: str) -> None:
    with open(path, "rb") as f:
        saved = pickle.load(f)
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    uri = f"torch://127.0.0.1:{server.port}"
    for name, ckpt in saved["checkpoints"].items():
        for how in ("dir-1", "dir-2", "dir-4", "store-1-then-2"):
            case = f"{name}-{how}"
            got = resumed(ckpt, case, how, uri)
            report(case, saved, name, got)


def resume_group(path: str) -> None:
    """Under torchrun: every rank resumes through ``torch://`` (torchrun's own store, the
    recipes' default in 0.2), checkpoints through it, and resumes that once more."""
    with open(path, "rb") as f:
        saved = pickle.load(f)
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    for name, ckpt in saved["checkpoints"].items():
        case = f"{name}-torchrun-{world}"
        pipe = build(world, rank, case, aggregate_store="torch://")
        pipe.restore(ckpt)
        it = iter(pipe)
        drawn = [next(it) for _ in range(RESUME_DRAWS // world)]
        again = pipe.checkpoint()
        pipe = build(world, rank, f"{case}-again", aggregate_store="torch://")
        pipe.restore(again)
        it = iter(pipe)
        drawn += [next(it) for _ in range(RESUME_DRAWS // world)]
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, lanes_of(drawn))
        if rank == 0:
            got = merged(parts)
            report(case, saved, name, got)
    dist.destroy_process_group()


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # a mid-window checkpoint warns, by design
    {"take": take, "resume": resume, "resume-group": resume_group}[sys.argv[1]](sys.argv[2])
