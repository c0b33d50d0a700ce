"""One protocol for the harness's side of a launch's faults, in the manner of Jepsen's
``Nemesis`` (set up, invoke, tear down): the runner loops over a launch's faults and knows
none of their kinds.

A driver is made for one launch (``nemeses.launch_faults`` makes them from the launch's
phase) and goes through the same steps in the same order:

1. ``prepare(spec)``: the launch's workload spec with what the fault needs (triggers, a
   control channel, per-rank proxies); ``deadline_ceiling_s(spec)``, asked before it: a
   deadline the fault imposes on the launch, if any;
2. ``watching(deadline_s)``: a context around the launch in which the driver acts when its
   moment comes (continues a stopped rank, stalls or kills the hosted store);
3. ``observe(run)``: once the launch returned, what the oracles must know of the fault
   before they judge (a slow link's held spans);
4. ``judge(run)``: the fault's problems (it left no evidence; its oracle's findings), with
   the driver kept on the run for the report and the known defects (``PhaseRun.fault``);
5. ``close()``: what the driver holds is released (a launch's proxies).

``ends(run)`` says whether a failed launch was ended by this fault (the next launch then
restores the last checkpoint that survived it), and ``judges_rank_faults`` whether its judging
covers the launch's rank faults (otherwise a rank fault is judged as a crash).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from zephon_chaos.problem import Problem
    from zephon_chaos.workload.spec import WorkloadSpec


class LaunchFault(Protocol):
    """The harness's side of one kind of a launch's faults. The defaults suit a driver with
    nothing to observe, nothing to release, and no judging of the launch's rank faults;
    a driver states the rest (``prepare``, ``judge``, ``ends``)."""

    judges_rank_faults: ClassVar[bool] = False
    """Its ``judge`` covers the launch's rank faults (a round-point fault's driver)."""

    def deadline_ceiling_s(self, spec: WorkloadSpec) -> float | None:
        """A deadline the launch must not pass because of this fault (a stalled link's:
        a known hang), or None (default)."""
        return None

    def prepare(self, spec: WorkloadSpec) -> WorkloadSpec:
        """``spec`` with what the fault needs; called once, before the launch."""
        ...

    @contextlib.contextmanager
    def watching(self, deadline_s: float) -> Iterator[None]:
        """Around the launch: act when the fault's moment comes (default: nothing to do)."""
        yield

    def observe(self, run: Any) -> None:
        """After the launch, before the oracles: set on ``run`` what they must know."""

    def judge(self, run: Any) -> list[Problem]:
        """After the oracles: the fault's own problems (``run`` is a ``PhaseRun``)."""
        ...

    def ends(self, run: Any) -> bool:
        """Whether this fault ended the launch ``run`` (it failed by it, nothing else)."""
        ...

    def close(self) -> None:
        """Release what the driver holds (default: nothing)."""
