"""What differs between a rank process and a rank thread (:class:`RankHooks`), with the
defaults a rank process uses: its scheduled faults fire in it, its agreements are gloo's."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.self_faults import signal_self
from zephon_chaos.workload.spec import RankFault


def fire(fault: RankFault, rank: int, out: RecordWriter) -> None:
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


def agree(ok: bool) -> bool:
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
    capture_warnings: Callable[[], AbstractContextManager[list[Any]]] = lambda: catch_warnings()
    fire: Callable[[RankFault, int, RecordWriter], None] = fire
    agree: Callable[[bool], bool] = agree
    call_ended: Callable[[int], None] = lambda index: None
    before_fault: Callable[[int], None] = lambda step: None


@contextlib.contextmanager
def catch_warnings() -> Iterator[list[Any]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


