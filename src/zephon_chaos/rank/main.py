"""Entry point of one rank: ``python -m zephon_chaos.rank SPEC.json``.

Runs ``spec.steps`` global steps (a rank consumes one batch per lane it owns per step),
records every batch, checkpoints where the spec says (collectively), and lets rank 0 persist
the merged checkpoint. Faults the spec schedules for this rank fire at their step.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zephon_chaos.faults.control import CALL_ENDED, notify
from zephon_chaos.lanes import dp_group, lanes_of
from zephon_chaos.rank.checkpointing import take_checkpoint
from zephon_chaos.rank.hooks import RankHooks
from zephon_chaos.rank.meetings import lag_hooks, meet, meet_before_fault, record_collective
from zephon_chaos.workload import persist
from zephon_chaos.workload.data import batch_ids, build_pipeline
from zephon_chaos.workload.plants import Plant
from zephon_chaos.workload.records import (
    BEGAN_RECORD,
    CHILD_FAULT_RECORD,
    LINK_HEALED_RECORD,
    WORKERS_RECORD,
    Batch,
    RecordWriter,
)
from zephon_chaos.workload.spec import ALL_WORKERS, ChildFault, PipelineSpec, WorkloadSpec

if TYPE_CHECKING:
    from zephon_chaos.faults.interposer import InterposerPlan


def _restart_scoped(spec: WorkloadSpec) -> PipelineSpec:
    """The pipeline with the run id this attempt configures: under ``run_id_per_restart``,
    the spec's plus torchrun's ``TORCHELASTIC_RESTART_COUNT``, as a recipe that scopes its
    rounds per restart does (``deployment.RunIdPolicy``)."""
    if not spec.run_id_per_restart:
        return spec.pipeline
    from zephon_chaos.faults.restart import restart_count

    return replace(spec.pipeline, run_id=f"{spec.pipeline.run_id}-r{restart_count()}")


def _aggregation(spec: WorkloadSpec) -> tuple[str | None, str | None]:
    mode = spec.pipeline.aggregation
    if mode == "store":
        return "torch://", None
    if mode == "store_explicit":
        if not spec.store_uri:
            raise ValueError(
                "aggregation 'store_explicit' needs spec.store_uri (torch://host:port)"
            )
        return spec.store_uri, None
    if not spec.aggregate_dir:
        raise ValueError("aggregation 'dir' needs spec.aggregate_dir")
    return None, spec.aggregate_dir


def run(spec: WorkloadSpec) -> int:
    """One rank process of a torchrun group: join the process group, run the rank, leave."""
    import torch.distributed as dist

    from zephon_chaos.faults.restart import MET_ROUND, met_round, restart_store, restart_view

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    spec = restart_view(spec)
    met = met_round(spec) if rank == 0 else None
    if met is not None:  # before this attempt's leader can announce a round of its own
        out = RecordWriter(spec.out_dir, rank)
        out.write(MET_ROUND, **met)
        out.close()
    if spec.backend == "nccl":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    pg_options: dict[str, Any] = {}
    if spec.pg_timeout_s is not None:
        from datetime import timedelta

        pg_options["timeout"] = timedelta(seconds=spec.pg_timeout_s)
    store = restart_store()
    if store is not None:  # a torchrun restart: this attempt's own keys
        pg_options.update(store=store, rank=rank, world_size=world)
    dist.init_process_group(spec.backend, **pg_options)
    device = None
    if spec.backend == "nccl":
        import torch

        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    default_store = _place_store_proxy(spec, rank, world)
    hooks = RankHooks(before_fault=lambda step: meet_before_fault(device, step))
    if spec.lags:  # a launch with a lag has no other fault (scenario_rules)
        hooks = lag_hooks(spec, rank, device)
    elif spec.sync == "lockstep":
        hooks = replace(hooks, before_checkpoint=lambda index: meet(device, index))
    code = run_rank(spec, rank, world, default_store=default_store, device=device, hooks=hooks)
    if spec.store_proxy_ports:
        record_collective(spec, rank, world, "after_run")
    with contextlib.suppress(Exception):
        dist.barrier()
    dist.destroy_process_group()
    return code


def _place_store_proxy(spec: WorkloadSpec, rank: int, world: int) -> str:
    """Route this rank's ``torch://`` client through its own proxy, if the spec gives one."""
    if not spec.store_proxy_ports:
        return "torch://"
    from zephon_chaos.faults.placement import place_store_proxy

    placement = place_store_proxy(spec, rank)
    out = RecordWriter(spec.out_dir, rank)
    out.write("placement", **(placement.as_record() if placement else {"rank": rank}))
    out.close()
    record_collective(spec, rank, world, "after_placement")
    return placement.store_uri if placement else "torch://"


def checkpoint_marks(spec: WorkloadSpec, per_step: int) -> list[int]:
    """Batch counts (on a rank with ``per_step`` lanes) after which the checkpoints fall."""
    return sorted({c.step * per_step + min(c.extra, per_step) for c in spec.checkpoints})


def run_rank(
    spec: WorkloadSpec,
    rank: int,
    world: int,
    *,
    default_store: str = "torch://",
    device: Any = None,
    hooks: RankHooks | None = None,
) -> int:
    """The rank's loop: batches, records, checkpoints, faults; the same for both tiers.

    ``default_store`` is what aggregation ``store`` uses: torchrun's ``torch://``, or an
    explicit ``torch://host:port`` where ranks are threads sharing one environment. When the
    data runs out, the checkpoints still due are taken at once (a final checkpoint at
    exhaustion), so every rank makes the same number of collective calls.
    """
    began = time.monotonic()
    hooks = hooks or RankHooks()
    out = RecordWriter(spec.out_dir, rank)
    out.write(BEGAN_RECORD, at=began)
    out.flush()  # a launch that hangs after this is judged; one that hangs before, not
    lanes = lanes_of(rank, world, spec.pipeline.canonical_replicas, spec.pipeline.mapping, spec.tp)
    store, agg_dir = _aggregation(spec)
    if store == "torch://" or str(rank) in spec.store_proxy_ports:
        store = default_store  # torchrun's store, or this rank's proxy in front of its store
    store, plan = _interposed(spec, rank, store)
    agg_dir = agg_dir or spec.aggregate_dir
    pipe = build_pipeline(
        spec.data,
        _restart_scoped(spec),
        world_size=world,
        rank=rank,
        data_dir=spec.data_dir,
        aggregate_store=store,
        aggregate_dir=agg_dir,
        tp=spec.tp,
    )
    if store is None:
        _interposed_dir(spec, rank, pipe)
    restored: dict[str, Any] | None = None
    timing: dict[str, float] = {}  # monotonic (system-wide): comparable across a host's ranks
    if spec.restore_from:
        restored = persist.load(spec.restore_from, spec.persist_format)
        timing["restore_at"] = time.monotonic()
        pipe.restore(restored)
        timing["restore_s"] = time.monotonic() - timing["restore_at"]
    out.write(
        "start",
        rank=rank,
        world=world,
        lanes=lanes,
        tp=spec.tp,
        dp_group=dp_group(rank, spec.tp),
        pid=os.getpid(),
        restored=spec.restore_from,
        started_at=time.monotonic(),
        **timing,
    )
    out.flush()
    plant = Plant(spec.plant, dp_group(rank, spec.tp), lanes, restored, world)
    per_step = max(1, len(lanes))
    marks = checkpoint_marks(spec, per_step)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
    firing = [f for f in spec.faults if f.fires_in(restart) and not f.at_round]
    faults = {f.at_step * per_step: f for f in firing if f.rank == rank}
    faulted_steps = {f.at_step * per_step for f in firing}
    child_faults = {f.at_step * per_step: f for f in spec.child_faults if f.rank == rank}
    it = iter(pipe)
    total = spec.steps * per_step
    taken = 0
    lane_counts: dict[int, int] = {lane: 0 for lane in lanes}
    fetch_at: float | None = None  # set while next() runs: the error record names that step

    stopping = {t.occurrence - 1 for t in spec.triggers if t.action == "sigstop"}

    def call_ended(index: int, attempt: int) -> None:
        """Undo the link faults that end with the round this call was (``ProxyFault.until``);
        tell the harness that this rank's first call of a round that stops a rank ended."""
        if spec.control is not None and attempt == 1 and index in stopping:
            notify(spec.control, {"kind": CALL_ENDED, "rank": rank, "index": index})
        if plan is None:
            return
        for facts in plan.heals.heal(plan):
            out.write(
                LINK_HEALED_RECORD, index=index, attempt=attempt, at=time.monotonic(), **facts
            )
        out.flush()

    def checkpoint(after: int) -> None:
        nonlocal taken
        hooks.before_checkpoint(taken)
        take_checkpoint(
            pipe, spec, rank, taken, after, lane_counts, out, hooks, call_ended=call_ended
        )
        taken += 1

    try:
        for n in range(total + 1):
            hooks.on_step(n, taken)
            if n in faulted_steps:
                hooks.before_fault(n // per_step)
            if n in faults:
                hooks.fire(faults[n], rank, out)
            if n in child_faults:
                _kill_children(child_faults[n], out)
            while marks and marks[0] == n:
                marks.pop(0)
                checkpoint(n)
            if n == total:
                break
            fetch_at = time.monotonic()
            try:
                batch = next(it)
            except StopIteration:
                fetched = (fetch_at, time.monotonic() - fetch_at)
                fetch_at = None
                out.write("exhausted", after_batches=n, fetch_at=fetched[0], fetch_s=fetched[1])
                out.flush()
                while marks:
                    marks.pop(0)
                    checkpoint(n)
                break
            fetched = (fetch_at, time.monotonic() - fetch_at)
            fetch_at = None
            if device is not None:
                _to_device(batch, device, out)
            lane = int(batch.lane_ids[0])
            lane_counts[lane] = lane_counts.get(lane, 0) + 1
            drawn = Batch(n, lane, batch_ids(batch, spec.data.stages), taken, *fetched)
            for planted in plant.apply(drawn):
                _write_batch(out, planted)
            if (n + 1) % per_step == 0:
                out.flush()
        for held in plant.release():
            _write_batch(out, held)
        if child_faults:
            from zephon_chaos.workload.children import pipeline_workers

            out.write(WORKERS_RECORD, pids=[w.pid for w in pipeline_workers()])
        out.write("end", batches=min(n, total))
    except Exception as exc:
        # When and why this rank failed, for the fault oracles (a pipeline that cannot reach
        # its store fails at its first batch, before any checkpoint record).
        now = time.monotonic()
        step = {} if fetch_at is None else {"fetch_at": fetch_at}  # a next() that raised
        out.write(
            "error",
            error=f"{type(exc).__name__}: {exc}",
            at=now,
            since_start_s=now - began,
            **step,
        )
        raise
    finally:
        out.close()
        with contextlib.suppress(Exception):
            it.close()  # type: ignore[attr-defined]
    return 0


def _write_batch(out: RecordWriter, b: Batch) -> None:
    """One batch's record, in the form ``records.read_rank`` reads back."""
    out.write(
        "batch",
        i=b.index,
        lane=b.lane,
        ids=b.ids,
        ckpts=b.checkpoints_before,
        fetch_at=b.fetch_at,
        fetch_s=b.fetch_s,
    )


def _kill_children(fault: ChildFault, out: RecordWriter) -> None:
    """Apply ``fault`` and record what it killed: the evidence that it acted."""
    from zephon_chaos.workload.children import kill_workers, pipeline_workers

    workers = pipeline_workers()
    at = time.monotonic()
    killed = kill_workers(every=fault.target == ALL_WORKERS, workers=workers)
    out.write(
        CHILD_FAULT_RECORD,
        at_step=fault.at_step,
        target=fault.target,
        at=at,
        killed=killed,
        before=sorted(w.pid for w in workers),
    )
    out.flush()


def _to_device(batch: Any, device: Any, out: RecordWriter) -> None:
    """Move the batch's tensors to the rank's GPU, as a training step would, and prove it.

    A Zephon ``SampleBatch`` holds ``records`` whose payloads are the source rows; rows of the
    memory and jsonl sources hold no tensors, so the batch's sample ids become one ``[B, 3]``
    int64 tensor instead. A sum computed on the device is recorded (kind ``device``): the
    records then show that every batch reached the GPU and arrived intact.
    """
    import torch

    tensors = [t for record in batch.records for t in _tensors_of(record.payload, torch.Tensor)]
    if not tensors:
        ids = [[int(x) for x in sid] for sid in batch.ids]
        tensors = [torch.tensor(ids, dtype=torch.int64)]
    moved = [t.to(device, non_blocking=True) for t in tensors]
    checksum = float(sum(t.double().sum() for t in moved).item())  # waits for the copies
    out.write(
        "device",
        lane=int(batch.lane_ids[0]),
        device=str(moved[0].device),
        tensors=len(moved),
        checksum=checksum,
    )


def _tensors_of(payload: Any, tensor_type: type) -> list[Any]:
    if isinstance(payload, tensor_type):
        return [payload]
    if isinstance(payload, dict):
        return [v for v in payload.values() if isinstance(v, tensor_type)]
    return []


def _interposed(
    spec: WorkloadSpec, rank: int, store: str | None
) -> tuple[str | None, InterposerPlan | None]:
    """The store URI wrapped in the interposer (``chaos://``) when the spec asks for it
    (None, aggregate_dir, stays None: ``_interposed_dir`` wraps the pipeline instead), and
    the interposer's plan (None without one): the rank undoes its healing faults with it."""
    if not (spec.interpose or any(t.rank == rank for t in spec.triggers)):
        return store, None
    from zephon_chaos.faults.interposer import interpose_uri, plan_for

    plan = plan_for(spec, rank)
    if store is None or plan is None:  # aggregate_dir: the pipeline's files are interposed
        return store, None
    return interpose_uri(store, plan), plan


def _interposed_dir(spec: WorkloadSpec, rank: int, pipe: Any) -> None:
    """With aggregation 'dir', the pipeline's round-file writes go through the interposer
    (``faults.dir_interposer``) when the spec asks for it, as a store's keys would."""
    if not (spec.interpose or any(t.rank == rank for t in spec.triggers)):
        return
    from zephon_chaos.faults.dir_interposer import interpose_pipeline
    from zephon_chaos.faults.interposer import plan_for

    plan = plan_for(spec, rank)
    if plan is not None:
        interpose_pipeline(pipe, plan)


def main(argv: list[str] | None = None) -> int:
    from zephon_chaos.workload.error_file import record

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m zephon_chaos.rank SPEC.json", file=sys.stderr)
        return 2
    spec = WorkloadSpec.read(Path(args[0]))
    try:
        return int(record(run)(spec) or 0)
    except Exception:
        traceback.print_exc()
        raise


if __name__ == "__main__":
    sys.exit(main())
