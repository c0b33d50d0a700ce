"""The liveness oracle's values: what it measures (steps, stalls, propagations), its bounds
and its verdict; :mod:`.liveness` measures and judges."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from zephon_chaos.problem import Area, Problem, ProblemKind, ProblemsVerdict

LEADER = 0
"""Zephon's round leader: global rank 0 (worker 0)."""


class Step(str, Enum):
    """A pipeline call that may block on the store or on peers."""

    FETCH = "fetch"
    CHECKPOINT = "checkpoint"
    RESTORE = "restore"


class Effect(str, Enum):
    """What a scheduled fault does to its rank's calls, for this oracle."""

    STALL = "stall"
    """Stopped on purpose: its calls from then on are not judged at all."""
    CUT = "cut"
    """Cut off from the store: its calls are not propagation measurements."""
    RESPAWN = "respawn"
    """Its pipeline's workers were killed: its batches from then on wait for replacements,
    which no timeout of Zephon's bounds, so its fetches are not judged (its checkpoints are)."""


class LivenessKind(str, Enum):
    SLOW_PROPAGATION = "slow-propagation"
    UNBOUNDED_WAIT = "unbounded-wait"


@dataclass(frozen=True)
class LivenessBounds:
    """The bounds, as multiples of ``T`` (``aggregate_timeout_s``) plus seconds.

    Defaults (why: docs/liveness.md): waiting ends within ``T + 2 T + 3 s``; the first
    ``next()`` gets ``startup_s`` more; a failure reaches every rank within ``T + 3 s``.
    """

    wait_margin_timeouts: float = 2.0
    """The operation in flight when the budget runs out, and the leader's failure notice."""
    wait_margin_s: float = 3.0
    """Local work (encode, merge, decode) and scheduling on loaded cores."""
    startup_s: float = 10.0
    """The first next() starts Zephon's runners and its MTP child (no timeout bounds it)."""
    propagation_timeouts: float = 1.0
    """A follower's failure reaches the others only when the leader's budget runs out."""
    propagation_margin_s: float = 3.0
    """The ranks' skew at the round's start, the notice write and the followers' wake-up."""

    def wait_bound_s(self, timeout_s: float, *, first_fetch: bool = False) -> float:
        bound = (1.0 + self.wait_margin_timeouts) * timeout_s + self.wait_margin_s
        return bound + (self.startup_s if first_fetch else 0.0)

    def propagation_bound_s(self, timeout_s: float) -> float:
        return self.propagation_timeouts * timeout_s + self.propagation_margin_s


@dataclass(frozen=True)
class Timing:
    """One blocking call on one rank: when it began and how long it took."""

    rank: int
    step: Step
    started_at: float
    seconds: float
    index: int | None = None
    """The checkpoint index (checkpoint), the batch index (fetch), None (restore)."""
    attempt: int = 1
    ok: bool = True
    first: bool = False
    """The launch's first next() on this rank (Zephon starts its runners there)."""

    @property
    def ended_at(self) -> float:
        return self.started_at + self.seconds


@dataclass(frozen=True)
class Stall:
    """A scheduled fault that stalls (or cuts off) ``rank`` from ``since`` on (None: always)."""

    rank: int
    cause: str
    since: float | None = None
    effect: Effect = Effect.STALL

    def covers(self, t: Timing) -> bool:
        """Whether step ``t`` was still running when the stall began (or began after)."""
        return t.rank == self.rank and (self.since is None or t.ended_at >= self.since)


@dataclass(frozen=True)
class Propagation:
    """A failed round: who failed first, when, and how long each other rank took to end."""

    index: int
    attempt: int
    first_rank: int
    failed_at: float
    lags: Mapping[int, float]
    """Per other rank, its call's end minus ``failed_at`` (negative: it ended before)."""
    since: Mapping[int, float] = field(default_factory=dict)
    """Per other rank, when its lag began: ``failed_at``, or its own call if that came later."""

    @property
    def by_leader(self) -> bool:
        return self.first_rank == LEADER

    @property
    def max_lag(self) -> float | None:
        return max(self.lags.values()) if self.lags else None


@dataclass(frozen=True)
class LivenessProblem:
    kind: LivenessKind
    phase: int
    step: Step
    checkpoint: int | None
    rank: int
    measured_s: float
    bound_s: float
    attempt: int = 1

    def problem(self) -> Problem:
        kind = (
            ProblemKind.SLOW_PROPAGATION
            if self.kind is LivenessKind.SLOW_PROPAGATION
            else ProblemKind.UNBOUNDED_WAIT
        )
        return Problem(Area.LIVENESS, kind, self.describe(), self.phase, self.checkpoint, self.rank)

    def describe(self) -> str:
        where = f"phase {self.phase}: liveness: "
        if self.kind is LivenessKind.SLOW_PROPAGATION:
            return (
                f"{where}slow propagation: checkpoint {self.checkpoint} attempt {self.attempt} "
                f"failed first elsewhere; rank {self.rank}'s checkpoint() ended "
                f"{self.measured_s:.2f}s later, over the bound {self.bound_s:.2f}s"
            )
        what = self.step.value + (
            f" {self.checkpoint} attempt {self.attempt}" if self.checkpoint is not None else ""
        )
        return (
            f"{where}unbounded wait: rank {self.rank}'s {what} blocked {self.measured_s:.2f}s, "
            f"over the bound {self.bound_s:.2f}s"
        )


@dataclass
class LivenessVerdict(ProblemsVerdict[LivenessProblem]):
    phase: int
    timeout_s: float
    bounds: LivenessBounds
    timings: list[Timing] = field(default_factory=list)
    """Every judged step (stalled ones are in ``excluded``)."""
    excluded: list[Timing] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)
    propagations: list[Propagation] = field(default_factory=list)
    problems: list[LivenessProblem] = field(default_factory=list)

    def waits(self, step: Step) -> list[float]:
        """Measured durations of one kind of step, in seconds."""
        return [t.seconds for t in self.timings if t.step is step]

    def lags(self) -> list[float]:
        """Each failed round's slowest propagation, in seconds."""
        return [p.max_lag for p in self.propagations if p.max_lag is not None]
