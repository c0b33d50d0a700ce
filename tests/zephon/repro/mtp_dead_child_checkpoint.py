"""Standalone (torch and zephon only): after a pipeline's MTP child died, ``checkpoint()``
succeeds with a state behind what the trainer consumed.

Run: ``python -m torch.distributed.run --standalone --nproc-per-node 2
mtp_dead_child_checkpoint.py``. With ``mtp_mode=True`` (torchtitan-zephon's default) the
engine runs in a child process. When that child dies (SIGKILL here; the OOM killer in a
trainer), the next ``next()`` raises ``RuntimeError("MTP subprocess exited unexpectedly")``
and the iteration's ``finally`` (``Pipeline._iter_mtp``, zephon 0.2.0 ``_internal/
pipeline.py`` L1885-1899) tries ``MTPPipeline.capture_final_state`` (``_internal/mtp.py``
L774-797), which returns silently as the child cannot answer, keeps ``_last_state`` (the last
explicit checkpoint's, or None) and drops the child (``self._sp = None``). ``Pipeline.checkpoint``
(L2019-2040) then no longer reaches ``MTPPipeline.checkpoint``'s refusal ("MTP subprocess
shut down but no checkpoint was captured", mtp.py L735-744): it returns that stale state,
or, with none, builds a fresh engine (L2037-2040) and returns the state of a pipeline that
has drawn nothing, which in a group joins the aggregation round like any shard. A trainer
that saves its loader's state after catching the error resumes its batches from there again.

Cases, one JSON line each: ``{"case", "consumed", "resumes_at", "iteration_error",
"checkpoint_error"}``; ``consumed`` and ``resumes_at`` map each lane to the number of its
batches drawn before the checkpoint and to the position in its uninterrupted stream that the
checkpoint, restored, continues from (equal when the checkpoint is right).

- ``group-dead-child`` (2 ranks, ``aggregate_store="torch://"``): rank 1's child dies after
  6 batches a rank; both ranks then checkpoint, and both get one merged checkpoint.
- ``one-rank-dead-child``: 1 rank, the child dies after 12 batches.
- ``one-rank-dead-child-after-a-checkpoint``: the same, with an explicit checkpoint after 4.
- controls: ``one-rank-live-child`` (checkpoint with the child alive) and ``one-rank-break``
  (the trainer leaves the loop after 12 batches; Zephon's documented way to stop early).
"""

from __future__ import annotations

import json
import os
import signal
import warnings
from collections.abc import Iterator
from typing import Any

import torch.distributed as dist
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

GROUP_C = 4
ONE_RANK_C = 2
GROUP_DRAWN = 6
ONE_RANK_DRAWN = 12
EARLIER_CHECKPOINT = 4
STREAM = 60
"""Batches of each lane's uninterrupted stream that a resume is looked up in."""
COMPARED = 3
"""Batches of a lane that locate where its resume continues."""


def build(world: int, rank: int, c: int, *, mtp: bool, run_id: str) -> Any:
    rows = {s: InMemoryShard([{"s": s, "i": i} for i in range(400)]) for s in range(3)}
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
            canonical_replicas=c,
            mtp_mode=mtp,
            run_id=run_id,
            aggregate_store="torch://",
            aggregate_timeout_s=20,
        )
    )


def lane_and_ids(batch: Any) -> tuple[int, list[list[int]]]:
    return int(batch.lane_ids[0]), [list(map(int, x)) for x in batch.ids]


def streams(c: int, n: int, ckpt: dict[str, Any] | None = None) -> dict[int, list[Any]]:
    """The first ``n`` batches of every lane, inline on one rank (from ``ckpt`` if given)."""
    pipe = build(1, 0, c, mtp=False, run_id="streams")
    if ckpt is not None:
        pipe.restore(ckpt)
    it = iter(pipe)
    out: dict[int, list[Any]] = {lane: [] for lane in range(c)}
    while min(len(v) for v in out.values()) < n:
        lane, ids = lane_and_ids(next(it))
        out[lane].append(ids)
    return out


def resumes_at(c: int, reference: dict[int, list[Any]], ckpt: dict[str, Any]) -> dict[int, Any]:
    """Per lane, where in the uninterrupted stream ``ckpt`` continues."""
    resumed = streams(c, COMPARED, ckpt)
    return {
        lane: next(
            (i for i in range(STREAM - COMPARED) if reference[lane][i : i + COMPARED] == got),
            None,
        )
        for lane, got in resumed.items()
    }


def read_proc(path: str) -> bytes:
    """A /proc file's bytes; b"" when its thread or process ended after it was listed (the
    pipeline's threads and children come and go while this looks)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def mtp_children() -> list[int]:
    me = os.getpid()
    found: list[int] = []
    for task in os.listdir(f"/proc/{me}/task"):
        found += [int(pid) for pid in read_proc(f"/proc/{me}/task/{task}/children").split()]
    return [pid for pid in found if b"spawn_main" in read_proc(f"/proc/{pid}/cmdline")]


def kill_child_and_drain(it: Iterator[Any], counts: dict[int, int]) -> str:
    """SIGKILL this process's MTP child, then draw (counting) until the iteration raises."""
    for pid in mtp_children():
        os.kill(pid, signal.SIGKILL)
    try:
        while True:
            lane, _ = lane_and_ids(next(it))
            counts[lane] = counts.get(lane, 0) + 1
    except Exception as exc:  # whatever the dead child makes next() raise is the outcome
        return f"{type(exc).__name__}: {exc}"


def checkpoint(pipe: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return pipe.checkpoint(), None
    except Exception as exc:  # the case's outcome is what this script reports
        return None, f"{type(exc).__name__}: {exc}"


def report(
    case: str,
    c: int,
    reference: dict[int, list[Any]],
    counts: dict[int, int],
    ckpt: dict[str, Any] | None,
    errors: tuple[str | None, str | None],
) -> None:
    """Print the case's line; ``errors``: the iteration's and the checkpoint's."""
    at = None if ckpt is None else resumes_at(c, reference, ckpt)
    line = {
        "case": case,
        "consumed": {str(lane): counts.get(lane, 0) for lane in range(c)},
        "resumes_at": None if at is None else {str(lane): n for lane, n in at.items()},
        "iteration_error": errors[0],
        "checkpoint_error": errors[1],
    }
    print(json.dumps(line) + "\n", end="", flush=True)


def group_case() -> None:
    world, rank = dist.get_world_size(), dist.get_rank()
    pipe = build(world, rank, GROUP_C, mtp=True, run_id="group")
    it = iter(pipe)
    counts: dict[int, int] = {}
    for _ in range(GROUP_DRAWN):
        lane, _ = lane_and_ids(next(it))
        counts[lane] = counts.get(lane, 0) + 1
    error = kill_child_and_drain(it, counts) if rank == 1 else None
    dist.barrier()
    ckpt, ckpt_error = checkpoint(pipe)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, (counts, ckpt, error, ckpt_error))
    if rank == 0:
        all_counts = {lane: n for c, *_ in gathered for lane, n in c.items()}
        ckpts = [g[1] for g in gathered]
        merged = ckpts[0] if all(k == ckpts[0] for k in ckpts) else None
        errors = [g[3] for g in gathered if g[3]] or (
            [] if merged is not None else ["the ranks got different checkpoints"]
        )
        reference = streams(GROUP_C, STREAM)
        outcome = (gathered[1][2], "; ".join(errors) or None)
        report("group-dead-child", GROUP_C, reference, all_counts, merged, outcome)


def one_rank_case(case: str, reference: dict[int, list[Any]]) -> None:
    pipe = build(1, 0, ONE_RANK_C, mtp=True, run_id=case)
    it = iter(pipe)
    counts: dict[int, int] = {}
    for n in range(1, ONE_RANK_DRAWN + 1):
        lane, _ = lane_and_ids(next(it))
        counts[lane] = counts.get(lane, 0) + 1
        if case.endswith("after-a-checkpoint") and n == EARLIER_CHECKPOINT:
            pipe.checkpoint()
    error = None
    if "dead-child" in case:
        error = kill_child_and_drain(it, counts)
    elif case == "one-rank-break":
        it.close()  # what leaving a for loop over the pipeline does to its iterator
    ckpt, ckpt_error = checkpoint(pipe)
    report(case, ONE_RANK_C, reference, counts, ckpt, (error, ckpt_error))


def main() -> None:
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    group_case()
    if dist.get_rank() == 0:
        reference = streams(ONE_RANK_C, STREAM)
        for case in (
            "one-rank-dead-child",
            "one-rank-dead-child-after-a-checkpoint",
            "one-rank-live-child",
            "one-rank-break",
        ):
            one_rank_case(case, reference)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
