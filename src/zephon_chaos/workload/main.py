"""Entry point of one rank: ``python -m zephon_chaos.workload SPEC.json``.

Runs ``spec.steps`` global steps (a rank consumes one batch per lane it owns per step),
records every batch, checkpoints where the spec says (collectively), and lets rank 0 persist
the merged checkpoint. Faults the spec schedules for this rank fire at their step.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from zephon_chaos.lanes import lanes_of
from zephon_chaos.workload import persist
from zephon_chaos.workload.data import build_pipeline
from zephon_chaos.workload.plants import Plant
from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.spec import RankFault, WorkloadSpec


def _aggregation(spec: WorkloadSpec) -> tuple[str | None, str | None]:
    mode = spec.pipeline.aggregation
    if mode == "store":
        return "torch://", None
    if mode == "store_explicit":
        if not spec.store_uri:
            raise ValueError("aggregation 'store_explicit' needs spec.store_uri (torch://host:port)")
        return spec.store_uri, None
    if not spec.aggregate_dir:
        raise ValueError("aggregation 'dir' needs spec.aggregate_dir")
    return None, spec.aggregate_dir


def _fire(fault: RankFault, rank: int, out: RecordWriter) -> None:
    out.write("fault", rank=rank, at_step=fault.at_step, action=fault.action, pid=os.getpid())
    out.flush()
    action = fault.action
    if action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    elif action == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "exit":
        os._exit(17)
    elif action == "raise":
        raise RuntimeError(f"rank {rank} raises at step {fault.at_step} (scheduled fault)")
    elif action == "kill_agent":
        os.kill(os.getppid(), signal.SIGKILL)
    else:
        raise ValueError(f"unknown rank fault action {action!r}")


def run(spec: WorkloadSpec) -> int:
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if spec.backend == "nccl":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(spec.backend)
    out = RecordWriter(spec.out_dir, rank)
    lanes = lanes_of(rank, world, spec.pipeline.canonical_replicas, spec.pipeline.mapping)
    store, agg_dir = _aggregation(spec)
    pipe = build_pipeline(
        spec.data,
        spec.pipeline,
        world_size=world,
        rank=rank,
        data_dir=spec.data_dir,
        aggregate_store=store,
        aggregate_dir=agg_dir,
    )
    restored: dict[str, Any] | None = None
    if spec.restore_from:
        restored = persist.load(spec.restore_from, spec.persist_format)
        pipe.restore(restored)
    out.write(
        "start", rank=rank, world=world, lanes=lanes, pid=os.getpid(), restored=spec.restore_from
    )
    out.flush()
    plant = Plant(spec.plant, rank, lanes, restored, world)
    per_step = max(1, len(lanes))
    marks = sorted({c.step * per_step + min(c.extra, per_step) for c in spec.checkpoints})
    faults = {f.at_step * per_step: f for f in spec.faults if f.rank == rank}
    device = None
    if spec.backend == "nccl":
        import torch

        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    it = iter(pipe)
    total = spec.steps * per_step
    taken = 0
    lane_counts: dict[int, int] = {lane: 0 for lane in lanes}
    for n in range(total + 1):
        if n in faults:
            _fire(faults[n], rank, out)
        while marks and marks[0] == n:
            marks.pop(0)
            _checkpoint(pipe, spec, rank, taken, n, lane_counts, out)
            taken += 1
        if n == total:
            break
        try:
            batch = next(it)
        except StopIteration:
            out.write("exhausted", after_batches=n)
            break
        if device is not None:
            _to_device(batch, device)
        lane = int(batch.lane_ids[0])
        lane_counts[lane] = lane_counts.get(lane, 0) + 1
        planted = plant.apply(lane, [tuple(int(x) for x in sid) for sid in batch.ids])
        if planted is not None:
            out.write("batch", i=n, lane=planted[0], ids=planted[1], ckpts=taken)
        if (n + 1) % per_step == 0:
            out.flush()
    out.write("end", batches=min(n, total))
    out.close()
    with contextlib.suppress(Exception):
        dist.barrier()
    dist.destroy_process_group()
    return 0


def _to_device(batch: Any, device: Any) -> None:
    """Move the batch's tensors to the rank's GPU, as a training step would."""
    import torch

    for value in vars(batch).values() if hasattr(batch, "__dict__") else ():
        if isinstance(value, torch.Tensor):
            value.to(device, non_blocking=True)


def _checkpoint(
    pipe: Any,
    spec: WorkloadSpec,
    rank: int,
    index: int,
    after: int,
    lane_counts: dict[int, int],
    out: RecordWriter,
) -> None:
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ckpt = pipe.checkpoint()
        except Exception as exc:
            out.write(
                "checkpoint",
                index=index,
                after_batches=after,
                ok=False,
                error=f"{type(exc).__name__}: {exc}",
                lane_counts=lane_counts,
                duration_s=time.monotonic() - started,
            )
            out.flush()
            raise
    covered = sorted(int(k) for k in (ckpt.get("progress") or {}))
    if rank == 0:
        persist.save(ckpt, spec.checkpoint_path(index), spec.persist_format)
    out.write(
        "checkpoint",
        index=index,
        after_batches=after,
        ok=True,
        lane_counts=lane_counts,
        digest=persist.digest(ckpt),
        lanes_covered=covered,
        warnings=[str(w.message) for w in caught],
        duration_s=time.monotonic() - started,
    )
    out.flush()


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import record

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m zephon_chaos.workload SPEC.json", file=sys.stderr)
        return 2
    spec = WorkloadSpec.read(Path(args[0]))
    try:
        return int(record(run)(spec) or 0)
    except Exception:
        traceback.print_exc()
        raise


if __name__ == "__main__":
    sys.exit(main())
