"""Entry point of one rank: ``python -m zephon_chaos.workload SPEC.json``.

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
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zephon_chaos.lanes import dp_group, lanes_of
from zephon_chaos.workload import persist
from zephon_chaos.workload.data import build_pipeline
from zephon_chaos.workload.plants import Plant
from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.self_faults import signal_self
from zephon_chaos.workload.spec import COLLECTIVE_FORMATS, RankFault, WorkloadSpec


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


def _fire(fault: RankFault, rank: int, out: RecordWriter) -> None:
    out.write(
        "fault",
        rank=rank,
        at_step=fault.at_step,
        action=fault.action,
        pid=os.getpid(),
        at=time.monotonic(),
    )
    out.flush()
    action = fault.action
    if signal_self(action):
        return
    if action == "raise":
        raise RuntimeError(f"rank {rank} raises at step {fault.at_step} (scheduled fault)")
    else:
        raise ValueError(f"unknown rank fault action {action!r}")


def run(spec: WorkloadSpec) -> int:
    """One rank process of a torchrun group: join the process group, run the rank, leave."""
    import torch.distributed as dist

    from zephon_chaos.faults.restart import restart_store, restart_view

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    spec = restart_view(spec)
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
    hooks = RankHooks(before_fault=lambda step: _meet_before_fault(device, step))
    if spec.lags:  # a launch with a lag has no other fault (scenario_rules)
        hooks = _lag_hooks(spec, rank, device)
    elif spec.sync == "lockstep":
        hooks = replace(hooks, before_checkpoint=lambda index: _meet(device, index))
    code = run_rank(spec, rank, world, default_store=default_store, device=device, hooks=hooks)
    if spec.store_proxy_ports:
        _record_collective(spec, rank, world, "after_run")
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
    _record_collective(spec, rank, world, "after_placement")
    return placement.store_uri if placement else "torch://"


def _record_collective(spec: WorkloadSpec, rank: int, world: int, label: str) -> None:
    """An all-reduce over the process group, recorded: gloo traffic works beside the proxies."""
    import torch
    import torch.distributed as dist

    value = torch.ones(1, dtype=torch.int64)
    dist.all_reduce(value)
    out = RecordWriter(spec.out_dir, rank)
    out.write("collective", label=label, sum=int(value.item()), world=world)
    out.close()


MEETING_LOST = "a peer left the group before the checkpoint meeting"
"""What a lockstep rank says when a peer died before meeting it: it never entered Zephon's
checkpoint, so the fault oracle takes this as the cause (``oracles.faults.CAUSES``)."""
FAULT_MEETING_LOST = "a peer left the group before the meeting of a faulted step"
"""What a rank says when a peer died before the meeting at a faulted step: the launch failed
before its fault fired, which the crash oracle reports as such."""


def _all_meet(device: Any, lost: str) -> None:
    """Every rank of the group meets in an all-reduce; a peer gone raises ``lost``, with the
    collective's own error (gloo's closed connection, as torchrun tears the group down)."""
    import torch
    import torch.distributed as dist

    try:
        dist.all_reduce(torch.ones(1, device=device))
    except Exception as exc:
        raise RuntimeError(f"{lost}: {exc}") from exc


def _meet(device: Any, index: int) -> None:
    """Lockstep ranks meet before a checkpoint, as a trainer's gradient all-reduce makes them.

    Without it a rank can reach ``checkpoint()`` later than ``aggregate_timeout_s`` after the
    leader (a worker process or MTP child still starting, a loaded machine), and the round
    fails by Zephon's documented timeout, which is no defect (tests/zephon/repro/).
    """
    _all_meet(device, f"{MEETING_LOST} of checkpoint {index}")


def _meet_before_fault(device: Any, step: int) -> None:
    """Every rank meets at a step where some rank's fault fires, before it fires: a rank of a
    synchronous trainer crashes in a step every rank entered, so the checkpoints scheduled
    before it were persisted and recorded (rank 0 persists, then walks on). Without it the
    fault raced rank 0's persisting: torchrun ended rank 0 mid-write and the oracle saw a
    checkpoint due before the fault lost, the agent's doing, not Zephon's."""
    _all_meet(device, f"{FAULT_MEETING_LOST} {step}")


def _lag_hooks(spec: WorkloadSpec, rank: int, device: Any) -> RankHooks:
    """Hooks of a free-running rank with deliberate late arrivals (``spec.lags``).

    A lagging rank receives a token from the rank it waits for, which sends it once its own
    ``checkpoint()`` call has ended (before any agreement, which would wait for the lagging
    rank): the lateness is a logical event, not a guess at a duration. Lockstep ranks would
    wait for each other in the meeting instead, so lags need ``sync: free``.
    """
    import torch
    import torch.distributed as dist

    if spec.sync != "free":
        raise ValueError(
            "spec.lags: a lagging rank waits for a peer's checkpoint call, and lockstep ranks "
            "meet before it (a deadlock): set sync 'free' or drop the lags"
        )
    waits = {lag.checkpoint: lag.awaited() for lag in spec.lags if lag.rank == rank}
    tells = {lag.checkpoint: lag.rank for lag in spec.lags if lag.awaited() == rank}

    def before(index: int) -> None:
        peer = waits.get(index)
        if peer is None:
            return
        began = time.monotonic()
        dist.recv(torch.zeros(1, device=device), src=peer)
        out = RecordWriter(spec.out_dir, rank)
        out.write("lag", checkpoint=index, waited_for=peer, began_at=began, at=time.monotonic())
        out.close()

    def ended(index: int) -> None:
        peer = tells.get(index)
        if peer is not None:
            dist.send(torch.ones(1, device=device), dst=peer)

    return RankHooks(before_checkpoint=before, call_ended=ended)


def _agree(ok: bool) -> bool:
    """Whether every rank's checkpoint succeeded: an all-reduce (MIN) of each rank's success.

    Without an initialised process group (rank threads) there is no one to agree with.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return ok
    import torch

    flag = torch.tensor([1 if ok else 0], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


@dataclass
class RankHooks:
    """What differs between a rank process (torchrun) and a rank thread (the in-process tier).

    ``on_step(n, taken)`` runs before batch ``n`` (and at the end), ``before_checkpoint(index)``
    before each collective checkpoint: either may raise to stop the rank. ``capture_warnings``
    records the warnings one checkpoint call emits; ``fire`` applies a scheduled fault;
    ``agree(ok)`` tells whether every rank's checkpoint attempt succeeded (lockstep retry,
    skip); ``call_ended(index)`` runs once the first ``checkpoint()`` call of a checkpoint has
    returned or raised (before any agreement: a lagging peer may wait for it);
    ``before_fault(step)`` runs on every rank at a step where some rank's fault fires, first.
    """

    on_step: Callable[[int, int], None] = lambda n, taken: None
    before_checkpoint: Callable[[int], None] = lambda index: None
    capture_warnings: Callable[[], AbstractContextManager[list[Any]]] = lambda: _catch_warnings()
    fire: Callable[[RankFault, int, RecordWriter], None] = _fire
    agree: Callable[[bool], bool] = _agree
    call_ended: Callable[[int], None] = lambda index: None
    before_fault: Callable[[int], None] = lambda step: None


@contextlib.contextmanager
def _catch_warnings() -> Iterator[list[Any]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


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
    lanes = lanes_of(
        rank, world, spec.pipeline.canonical_replicas, spec.pipeline.mapping, spec.tp
    )
    store, agg_dir = _aggregation(spec)
    if store == "torch://" or str(rank) in spec.store_proxy_ports:
        store = default_store  # torchrun's store, or this rank's proxy in front of its store
    store = _interposed(spec, rank, store)
    agg_dir = agg_dir or spec.aggregate_dir
    pipe = build_pipeline(
        spec.data,
        spec.pipeline,
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
    firing = [f for f in spec.faults if f.restart in (None, restart) and not f.at_round]
    faults = {f.at_step * per_step: f for f in firing if f.rank == rank}
    faulted_steps = {f.at_step * per_step for f in firing}
    it = iter(pipe)
    total = spec.steps * per_step
    taken = 0
    lane_counts: dict[int, int] = {lane: 0 for lane in lanes}
    fetch_at: float | None = None  # set while next() runs: the error record names that step

    def checkpoint(after: int) -> None:
        nonlocal taken
        hooks.before_checkpoint(taken)
        _checkpoint(pipe, spec, rank, taken, after, lane_counts, out, hooks)
        taken += 1

    try:
        for n in range(total + 1):
            hooks.on_step(n, taken)
            if n in faulted_steps:
                hooks.before_fault(n // per_step)
            if n in faults:
                hooks.fire(faults[n], rank, out)
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
            planted = plant.apply(lane, [tuple(int(x) for x in sid) for sid in batch.ids])
            if planted is not None:
                out.write(
                    "batch",
                    i=n,
                    lane=planted[0],
                    ids=planted[1],
                    ckpts=taken,
                    fetch_at=fetched[0],
                    fetch_s=fetched[1],
                )
            if (n + 1) % per_step == 0:
                out.flush()
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


def _interposed(spec: WorkloadSpec, rank: int, store: str | None) -> str | None:
    """The store URI wrapped in the interposer (``chaos://``) when the spec asks for it
    (None, aggregate_dir, stays None: ``_interposed_dir`` wraps the pipeline instead)."""
    if not (spec.interpose or any(t.rank == rank for t in spec.triggers)):
        return store
    from zephon_chaos.faults.interposer import interpose_uri, plan_for

    plan = plan_for(spec, rank)
    if store is None or plan is None:  # aggregate_dir: the pipeline's files are interposed
        return store
    return interpose_uri(store, plan)


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


def _checkpoint(
    pipe: Any,
    spec: WorkloadSpec,
    rank: int,
    index: int,
    after: int,
    lane_counts: dict[int, int],
    out: RecordWriter,
    hooks: RankHooks,
) -> None:
    """One collective checkpoint; under ``spec.retry``, as many attempts as it allows.

    Each attempt of a retrying rank is recorded (kind ``checkpoint_attempt``, with the
    agreement under lockstep and skip); the one ``checkpoint`` record is the final outcome.
    Rank 0 persists only a checkpoint that is final (agreed, under lockstep and skip). Under
    skip a checkpoint not every rank got is recorded as failed (``skipped``) and the rank
    trains on: every rank makes the same calls, one checkpoint and one agreement each.
    """
    started = time.monotonic()
    attempts = 1 if spec.retry in ("none", "skip") else max(1, spec.retry_attempts)
    agreeing = spec.retry in ("lockstep", "skip")
    error: str = ""
    ckpt: dict[str, Any] | None = None
    warned: list[Any] = []
    attempt = 0
    ended = started  # when the last pipe.checkpoint() call returned or raised
    for attempt in range(1, attempts + 1):
        began = time.monotonic()
        with hooks.capture_warnings() as caught:
            warned = caught
            try:
                ckpt, error = pipe.checkpoint(), ""
            except Exception as exc:
                ended = time.monotonic()
                ckpt, error = None, f"{type(exc).__name__}: {exc}"
                if attempt == 1:
                    hooks.call_ended(index)
                if spec.retry == "none":
                    _write_checkpoint(
                        out, index, after, lane_counts, started, error=error, ended_at=ended
                    )
                    raise
            else:
                ended = time.monotonic()
                if attempt == 1:
                    hooks.call_ended(index)
        if spec.retry == "none":
            break
        out.write(
            "checkpoint_attempt",
            index=index,
            attempt=attempt,
            ok=ckpt is not None,
            retry=spec.retry,
            error=error or None,
            digest=persist.digest(ckpt) if ckpt is not None else None,
            started_at=began,
            ended_at=ended,
        )
        out.flush()
        agreed = ckpt is not None
        if agreeing:
            try:
                agreed = hooks.agree(agreed)
            except Exception as exc:  # a peer died: the agreement itself failed
                error = f"{type(exc).__name__}: lockstep agreement failed: {exc}"
                _write_checkpoint(
                    out, index, after, lane_counts, started, error=error, ended_at=ended
                )
                raise
            out.write("checkpoint_agreement", index=index, attempt=attempt, all_ok=agreed)
            out.flush()
        if agreed:
            break
        if ckpt is not None:
            error = (
                f"RuntimeError: checkpoint {index} succeeded here but failed on another rank "
                f"({spec.retry} agreement, attempt {attempt} of {attempts})"
            )
            ckpt = None
    else:
        if spec.retry == "skip":  # recorded, not persisted; the next scheduled one follows
            _write_checkpoint(
                out, index, after, lane_counts, started, error=error, ended_at=ended, skipped=True
            )
            return
        _write_checkpoint(
            out, index, after, lane_counts, started, error=error, attempts=attempts, ended_at=ended
        )
        raise RuntimeError(f"checkpoint {index} failed after {attempts} attempt(s): {error}")
    assert ckpt is not None
    if rank == 0 or spec.persist_format in COLLECTIVE_FORMATS:  # DCP: every rank, together
        persist.save(ckpt, spec.checkpoint_path(index), spec.persist_format)
    _write_checkpoint(
        out,
        index,
        after,
        lane_counts,
        started,
        ckpt=ckpt,
        caught=warned,
        attempts=attempt,
        ended_at=ended,
    )


def _write_checkpoint(
    out: RecordWriter,
    index: int,
    after: int,
    lane_counts: dict[int, int],
    started: float,
    *,
    ckpt: dict[str, Any] | None = None,
    error: str = "",
    caught: list[Any] | None = None,
    attempts: int = 1,
    ended_at: float | None = None,
    skipped: bool = False,
) -> None:
    fields: dict[str, Any] = {
        "index": index,
        "after_batches": after,
        "ok": ckpt is not None,
        "lane_counts": lane_counts,
        "duration_s": time.monotonic() - started,
        "started_at": started,
        "ended_at": ended_at,
        "attempts": attempts,
    }
    if ckpt is None:
        fields["error"] = error
        if skipped:
            fields["skipped"] = True
    else:
        fields["digest"] = persist.digest(ckpt)
        fields["lanes_covered"] = sorted(int(k) for k in (ckpt.get("progress") or {}))
        fields["warnings"] = [str(w.message) for w in caught or []]
    out.write("checkpoint", **fields)
    out.flush()


def main(argv: list[str] | None = None) -> int:
    from zephon_chaos.workload.error_file import record

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
