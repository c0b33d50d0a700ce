"""A launch's deadline from what it should take, not a flat one (docs/explore.md, "Launch
deadlines").

The scenario's reference run (one uninterrupted launch) is measured: its start-up, its
pipeline's start, its steps and its teardown (:class:`ReferenceTiming`). A launch is expected
to take as long, scaled to its own steps, checkpoint rounds and ranks; its faults add their
own bounds (each failing wait ``oracles.faults.failure_bound_s``, a stalled store its stall);
a margin covers a loaded machine; the flat deadline stays the ceiling. :func:`launch_deadline`
is pure: typed inputs in, a :class:`Deadline` out, which says why it is what it is.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from zephon_chaos.oracles.faults import failure_bound_s
from zephon_chaos.scenario import Launch
from zephon_chaos.workload.records import BEGAN_RECORD, RankRecord, read_rank
from zephon_chaos.workload.spec import WorkloadSpec

MARGIN_FACTOR = 3.0
"""The expected duration times this: a 2-core machine shared by other work runs a launch
2-3 times slower than a quiet one (start-up above all: every rank imports torch)."""
MARGIN_S = 20.0
"""Added to every deadline: scheduling hiccups that do not scale with the launch (a rank
starved for seconds, the agent's teardown of a failed group), and room for a launch whose
expected duration is a few seconds (the warm lane, rank threads)."""
ROUND_S = 1.0
"""One checkpoint round or restore that does not fail: the reference takes none, so it is not
measured there (tens to hundreds of milliseconds each measured here, persisting included)."""
WATCHDOG_POLL_S = 5.0
"""How often Zephon's watchdog looks for dead pipeline workers before starting new ones."""
CORES = len(os.sched_getaffinity(0)) or 1


class CeilingKind(Enum):
    """What limits a deadline from above, whatever the formula says."""

    FLAT = "the flat --deadline"
    STALL = "a stalling link's deadline (3T+3s+30s)"
    BUDGET = "the budget's end"


@dataclass(frozen=True)
class Ceiling:
    kind: CeilingKind
    seconds: float


@dataclass(frozen=True)
class ReferenceTiming:
    """What the scenario's reference run took, measured from its records and launch."""

    ranks: int
    steps: int
    """Global steps its ranks drew: all its data where that ran out first (a launch that
    resumes draws no more than the rest of it)."""
    startup_s: float
    """Launch start to the last rank beginning its loop: interpreters, torch's import, the
    rendezvous and the process group (forks of a warm server, threads: far less)."""
    pipeline_s: float
    """A rank's loop begun to its first batch: the pipeline built and started (its worker
    processes, with ``runner: process`` or ``mtp_mode``, which import torch)."""
    step_s: float
    """One global step after the first batch."""
    teardown_s: float
    """The last batch to the launch's return: the process group's end, the agent's exit."""
    load: float = 0.0
    """The machine's load average (1 minute) when it was measured."""


@dataclass(frozen=True)
class MeasuredReference:
    """A reference run as the runner keeps it: its records, and its timing where measured."""

    records: list[RankRecord]
    timing: ReferenceTiming | None = None


@dataclass(frozen=True)
class LaunchPlan:
    """What about a launch decides how long it may take."""

    ranks: int
    steps: int
    rounds: int
    """Checkpoint rounds it takes, plus one if it restores."""
    timeout_s: float
    """``aggregate_timeout_s``: the T of every wait's failure bound."""
    attempts: int = 1
    """Attempts of one failing checkpoint under the launch's retry policy."""
    faulted_waits: int = 0
    """Waits its own faults may make fail, each up to the failure bound."""
    stall_s: float = 0.0
    """How long its hosted store is stopped (SIGSTOP) by a fault."""
    respawns: int = 0
    """Pipeline-worker kills (child faults) whose workers must be started anew."""
    restarts: int = 0
    """torchrun ``--max-restarts``: each restart is the whole attempt again."""


@dataclass(frozen=True)
class Deadline:
    """A launch's deadline and why: ``seconds`` is what the launch got."""

    seconds: float
    formula_s: float | None
    """What the formula gave; None without a measured reference (the ceiling then)."""
    expected_s: float
    """The launch's expected duration, restarts included (0 without a reference)."""
    waits: int
    """Waits allowed to fail, each up to ``bound_s``."""
    bound_s: float
    stall_s: float
    ceiling: Ceiling
    """The lowest ceiling; it, not the formula, gave ``seconds`` when lower."""
    startup_s: float = 0.0
    """The expected start-up of the launch's first attempt (scaled): the part of
    ``expected_s`` that its group's formation stands for."""

    @property
    def after_formation_s(self) -> float | None:
        """The deadline counted from the group's formation: the formula without its
        allowance for the first start-up, which the measured formation replaces (None
        without a formula: the ceiling then)."""
        if self.formula_s is None:
            return None
        return self.formula_s - MARGIN_FACTOR * self.startup_s

    def _terms(self) -> str:
        terms = f"{MARGIN_FACTOR:g} x expected {self.expected_s:.1f}s"
        if self.waits:
            terms += f" + {self.waits} failing wait(s) x {self.bound_s:.1f}s"
        if self.stall_s:
            terms += f" + stall {self.stall_s:.1f}s"
        return terms + f" + {MARGIN_S:g}s = {self.formula_s or 0:.0f}s"

    @property
    def limited_by(self) -> CeilingKind | None:
        """The ceiling that set the deadline, or None when the formula did."""
        if self.formula_s is not None and self.formula_s <= self.ceiling.seconds:
            return None
        return self.ceiling.kind

    def capped(self, ceiling: Ceiling) -> Deadline:
        """This deadline under one more ceiling (the budget's end, known at launch time)."""
        if ceiling.seconds >= self.seconds:
            return self
        return replace(self, seconds=ceiling.seconds, ceiling=ceiling)

    def describe(self, formed_s: float | None = None) -> str:
        """One line: the deadline and its terms, for a report of a launch that passed it
        (``formed_s``: when its group formed, where the deadline counted from there)."""
        if formed_s is not None and self.after_formation_s is not None:
            return (
                f"deadline: {self.after_formation_s:.0f}s after the group formed "
                f"(at {formed_s:.1f}s), at most {self.ceiling.seconds:.0f}s "
                f"({self.ceiling.kind.value}); from the start: {self._terms()}"
            )
        if self.formula_s is None:
            return (
                f"deadline {self.seconds:.0f}s: {self.ceiling.kind.value} "
                "(no measured reference run to derive one from)"
            )
        terms = self._terms()
        limited = self.limited_by
        if limited is None:
            return f"deadline {self.seconds:.0f}s = {terms}"
        return f"deadline {self.seconds:.0f}s: {limited.value}, below {terms}"


def slowdown(runnable: float, cores: int) -> float:
    """How much slower a CPU-bound process runs with ``runnable`` of them on ``cores`` cores."""
    return max(1.0, runnable / cores)


def scale(plan: LaunchPlan, reference: ReferenceTiming, load: float, cores: int) -> float:
    """How much slower the launch should run than its reference, never faster: its ranks
    against the reference's (each is CPU-bound at start-up: torch's import), and the
    machine's load now against the load the reference was measured under."""
    ranks = slowdown(plan.ranks, cores) / slowdown(reference.ranks, cores)
    machine = slowdown(load, cores) / slowdown(reference.load, cores)
    return max(1.0, ranks) * max(1.0, machine)


def expected_s(
    reference: ReferenceTiming, plan: LaunchPlan, load: float = 0.0, cores: int = CORES
) -> float:
    """How long the launch should take, restarts included: the reference's fixed parts, its
    step time for the launch's steps, a round's allowance per round, all scaled."""
    attempt = (
        reference.startup_s
        + reference.pipeline_s
        + reference.step_s * min(plan.steps, reference.steps)
        + ROUND_S * plan.rounds
        + reference.teardown_s
    ) * scale(plan, reference, load, cores)
    return attempt * (1 + plan.restarts)


def launch_deadline(
    reference: ReferenceTiming | None,
    plan: LaunchPlan,
    ceilings: Sequence[Ceiling],
    load: float = 0.0,
    cores: int = CORES,
) -> Deadline:
    """``MARGIN_FACTOR x expected + failing waits x bound + stall + MARGIN_S``, at most the
    lowest ceiling; without a measured reference, the lowest ceiling. ``load``: the
    machine's load average now (1 minute), against the reference's.

    The waits: one any launch may meet (a round failing through a defect must be judged as a
    failure within Zephon's bound, not as a hang), each wait its faults may fail, and each
    pipeline-worker respawn (the watchdog's poll and a fresh worker's start-up).
    """
    ceiling = min(ceilings, key=lambda c: c.seconds)
    bound = failure_bound_s(plan.timeout_s, plan.attempts)
    waits = 1 + plan.faulted_waits
    if reference is None:
        return Deadline(ceiling.seconds, None, 0.0, waits, bound, plan.stall_s, ceiling)
    expected = expected_s(reference, plan, load, cores)
    respawn = plan.respawns * (WATCHDOG_POLL_S + reference.pipeline_s)
    formula = MARGIN_FACTOR * (expected + respawn) + waits * bound + plan.stall_s + MARGIN_S
    startup = reference.startup_s * scale(plan, reference, load, cores)
    return Deadline(
        min(formula, ceiling.seconds), formula, expected + respawn, waits, bound,
        plan.stall_s, ceiling, startup,
    )  # fmt: skip


def every_rank_began(out_dir: Path, world_size: int) -> Callable[[], bool]:
    """Whether every rank of a launch writing records under ``out_dir`` wrote its first
    record of the loop (``RankRecord.began``, written once its process group formed): the
    logical event a launch's deadline counts from (``LaunchSpec.formation``)."""
    began: set[int] = set()

    def formed() -> bool:
        for rank in range(world_size):
            if rank not in began and read_rank(out_dir, rank).began:
                began.add(rank)
        return len(began) == world_size

    return formed


def plan_of(phase: Launch, spec: WorkloadSpec) -> LaunchPlan:
    """The plan of launching ``phase`` as ``spec`` (after the runner prepared it).

    Faulted waits: a link, hosted-store or round-point rank fault may fail every round of
    the launch and one wait outside them (a ``next()`` or ``restore()`` on a dead link); a
    dead hosted store also makes the leader's clean-up wait once per follower's
    acknowledgement (``known.dead-store-ack-cleanup``); a lag fails its round twice, the
    awaited rank's call and the late one's.
    """
    rounds = len({(c.step, c.extra) for c in phase.checkpoints}) + bool(spec.restore_from)
    faulted = bool(
        phase.proxy_faults or phase.store_faults or any(f.at_round for f in phase.rank_faults)
    )
    waits = (rounds + 1) * faulted + 2 * len(phase.lags)
    if phase.store_faults:
        waits += phase.world_size - 1
    retrying = spec.retry in ("lockstep", "independent")
    return LaunchPlan(
        ranks=phase.world_size,
        steps=phase.steps,
        rounds=rounds,
        timeout_s=spec.pipeline.aggregate_timeout_s,
        attempts=max(1, spec.retry_attempts) if retrying else 1,
        faulted_waits=waits,
        stall_s=sum(f.stall_s for f in phase.store_faults if f.action == "sigstop"),
        respawns=len(phase.child_faults),
        restarts=phase.max_restarts,
    )


def measure_reference(
    records: Sequence[RankRecord], launched_at: float, returned_at: float, load: float = 0.0
) -> ReferenceTiming | None:
    """The reference's timing from its ranks' records (``time.monotonic`` stamps, one clock
    for a host's processes) and when the runner launched it and got it back; None when a
    rank left no stamps to measure by (it never began, or neither drew nor ran dry)."""
    began: list[float] = []
    first: list[float] = []
    last: list[float] = []
    step_s = 0.0
    steps = 0
    for rec in records:
        at = next((ev.get("at") for ev in rec.events if ev.get("kind") == BEGAN_RECORD), None)
        ends = [
            b.fetch_at + b.fetch_s
            for b in rec.batches
            if b.fetch_at is not None and b.fetch_s is not None
        ]
        dry = [sum(rec.exhausted_fetch)] if rec.exhausted_fetch else []  # its last next()
        if at is None or not ends + dry:
            return None
        began.append(float(at))
        first.append(min(ends + dry) - float(at))
        last.append(max(ends + dry))
        rank_steps = math.ceil(len(ends) / max(1, len(rec.lanes)))
        steps = max(steps, rank_steps)
        if rank_steps > 1:
            step_s = max(step_s, (max(ends) - min(ends)) / (rank_steps - 1))
    if not began:
        return None
    return ReferenceTiming(
        ranks=len(records),
        steps=steps,
        startup_s=max(0.0, max(began) - launched_at),
        pipeline_s=max(first),
        step_s=step_s,
        teardown_s=max(0.0, returned_at - max(last)),
        load=load,
    )
