"""Where the ranks of a torchrun group meet: before a lockstep checkpoint, before a faulted
step, and a lagging rank's wait for its peer; each an all-reduce or a message over gloo."""

from __future__ import annotations

import time
from typing import Any

from zephon_chaos.rank.hooks import RankHooks
from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.spec import WorkloadSpec


def record_collective(spec: WorkloadSpec, rank: int, world: int, label: str) -> None:
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


def all_meet(device: Any, lost: str) -> None:
    """Every rank of the group meets in an all-reduce; a peer gone raises ``lost``, with the
    collective's own error (gloo's closed connection, as torchrun tears the group down)."""
    import torch
    import torch.distributed as dist

    try:
        dist.all_reduce(torch.ones(1, device=device))
    except Exception as exc:
        raise RuntimeError(f"{lost}: {exc}") from exc


def meet(device: Any, index: int) -> None:
    """Lockstep ranks meet before a checkpoint, as a trainer's gradient all-reduce makes them.

    Without it a rank can reach ``checkpoint()`` later than ``aggregate_timeout_s`` after the
    leader (a worker process or MTP child still starting, a loaded machine), and the round
    fails by Zephon's documented timeout, which is no defect (tests/zephon/repro/).
    """
    all_meet(device, f"{MEETING_LOST} of checkpoint {index}")


def meet_before_fault(device: Any, step: int) -> None:
    """Every rank meets at a step where some rank's fault fires, before it fires: a rank of a
    synchronous trainer crashes in a step every rank entered, so the checkpoints scheduled
    before it were persisted and recorded (rank 0 persists, then walks on). Without it the
    fault raced rank 0's persisting: torchrun ended rank 0 mid-write and the oracle saw a
    checkpoint due before the fault lost, the agent's doing, not Zephon's."""
    all_meet(device, f"{FAULT_MEETING_LOST} {step}")


def lag_hooks(spec: WorkloadSpec, rank: int, device: Any) -> RankHooks:
    """Hooks of a free-running rank with deliberate late arrivals (``spec.lags``).

    A lagging rank receives a token from the rank it waits for, which sends it once its own
    ``checkpoint()`` call of checkpoint ``lag.checkpoint + lag.by`` has ended (before any
    agreement, which would wait for the lagging rank): the lateness is a logical event, not a
    guess at a duration; with ``by`` > 0 the rank drifts whole checkpoint intervals behind.
    Lockstep ranks would wait for each other in the meeting instead, so lags need ``sync:
    free``.
    """
    import torch
    import torch.distributed as dist

    if spec.sync != "free":
        raise ValueError(
            "spec.lags: a lagging rank waits for a peer's checkpoint call, and lockstep ranks "
            "meet before it (a deadlock): set sync 'free' or drop the lags"
        )
    waits = {lag.checkpoint: lag for lag in spec.lags if lag.rank == rank}
    tells = {lag.awaited_call: lag.rank for lag in spec.lags if lag.awaited() == rank}

    def before(index: int) -> None:
        lag = waits.get(index)
        if lag is None:
            return
        peer = lag.awaited()
        began = time.monotonic()
        dist.recv(torch.zeros(1, device=device), src=peer)
        out = RecordWriter(spec.out_dir, rank)
        out.write(
            "lag",
            checkpoint=index,
            waited_for=peer,
            behind=lag.by,
            began_at=began,
            at=time.monotonic(),
        )
        out.close()

    def ended(index: int) -> None:
        peer = tells.get(index)
        if peer is not None:
            dist.send(torch.ones(1, device=device), dst=peer)

    return RankHooks(before_checkpoint=before, call_ended=ended)


