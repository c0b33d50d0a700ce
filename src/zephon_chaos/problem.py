"""What an oracle or the runner found wrong, as a value made where it is found.

A finding's signature (``explore.signature``), the known defects (``explore.known``) and the
reports read a problem's fields; its ``text`` is for people and is never parsed back, so
rewording a message changes no signature and no rule order decides an area.

Every oracle's verdict has one shape, :class:`OracleVerdict` (in the manner of Jepsen's
``Checker``, whose ``check`` returns a validity map): whether it holds, and its problems
through one method, ``found()``. The runner collects every verdict's problems the same way
(:func:`found_in`); what else a verdict keeps is its own typed evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Generic, Protocol, TypeVar, runtime_checkable


class Area(StrEnum):
    """Which oracle or step failed, in order of precedence: the first names a finding."""

    REFERENCE = "reference"
    """The uninterrupted run the others are compared with failed."""
    LAUNCH = "launch"
    """A launch failed that should not have (the kind is the first failure's error type)."""
    REFUSAL = "refusal"
    """A launch meant to be refused was not, or not with the expected error."""
    CRASH = "crash"
    """A launch with rank faults did not end as scheduled."""
    RESTART = "restart"
    """A launch torchrun restarted did not restart as scheduled."""
    FAULT = "fault"
    """The fault oracle (``oracles.faults``): a faulted round ended in none of its outcomes."""
    BATCHES_IDENTICAL = "batches-identical"
    """The global-batch oracle under the exact contract."""
    BATCHES_MID_WINDOW = "batches-mid-window"
    """The global-batch oracle under the mid-window contract."""
    VERIFY = "verify"
    """A merged checkpoint free-running ranks got, resumed by a verification launch of its
    own (``runner.verify``), did not deliver the reference's batches from where it stood."""
    CHECKPOINT = "checkpoint"
    """The checkpoint oracle (``oracles.checkpoints``)."""
    POLICY = "policy"
    """The retry-policy oracle (``oracles.policies``)."""
    LIVENESS = "liveness"
    """Zephon's timing promises (``oracles.liveness``)."""

    @property
    def precedence(self) -> int:
        return list(Area).index(self)


class ProblemKind(StrEnum):
    """The problem within its area. A launch's kind is also the error type that failed it."""

    # launch, reference
    FAILED = "failed"
    TIMEOUT = "timeout"
    # refusal
    ACCEPTED = "accepted"
    HANG = "hang"
    WRONG_ERROR = "wrong-error"
    # crash
    NO_END = "no-end"
    EARLY_FAILURE = "early-failure"
    LOST_CHECKPOINT = "lost-checkpoint"
    CHECKPOINT = "checkpoint"
    # restart
    FAULT_NEVER_FIRED = "fault-never-fired"
    NO_RESTART = "no-restart"
    WRONG_RESTORE = "wrong-restore"
    # fault (also HANG, LOST_CHECKPOINT)
    NO_EVIDENCE = "no-evidence"
    SLOW_FAILURE = "slow-failure"
    NO_CAUSE = "no-cause"
    NOT_ENDED = "not-ended"
    NO_RECORD = "no-record"
    INCONSISTENT = "inconsistent"
    MOVED = "moved"
    CHANGED_ON_DISK = "changed-on-disk"
    NO_RECOVERY_AFTER_HEAL = "no-recovery-after-heal"
    """A link fault healed at the end of its round, every rank on time, and the next
    checkpoint call did not complete on every rank (``oracles.healing``)."""
    # batches (in order of precedence within the area)
    MISSING = "missing"
    DUPLICATED = "duplicated"
    LANE_COUNT = "lane-count"
    UNKNOWN_LANES = "unknown-lanes"
    WINDOW = "window"
    DIVERGENT = "divergent"
    TRAINER_STEP_DIVERGED = "trainer-step-diverged"
    RANK_SEQUENCE_DIVERGED = "rank-sequence-diverged"
    DP_GROUP_DIVERGED = "dp-group-diverged"
    # checkpoint (also FAILED)
    NONE = "none"
    MISSING_RECORD = "missing-record"
    DIFFERS = "differs"
    COVERAGE = "coverage"
    NO_WARNING = "no-warning"
    SPURIOUS_WARNING = "spurious-warning"
    # policy
    ON_TIME_FAILURE = "on-time-failure"
    MISALIGNED = "misaligned"
    PERSISTED_FAILED = "persisted-failed"
    MISSING_FILE = "missing-file"
    # liveness
    SLOW_PROPAGATION = "slow-propagation"
    UNBOUNDED_WAIT = "unbounded-wait"


BATCH_KINDS = (
    ProblemKind.MISSING,
    ProblemKind.DUPLICATED,
    ProblemKind.LANE_COUNT,
    ProblemKind.UNKNOWN_LANES,
    ProblemKind.WINDOW,
    ProblemKind.DIVERGENT,
    ProblemKind.TRAINER_STEP_DIVERGED,
    ProblemKind.RANK_SEQUENCE_DIVERGED,
)
"""The global-batch oracle's kinds, the first present naming a violation of the contract: a
trainer step on other samples outranks draws that are only in another order."""


@dataclass(frozen=True)
class Problem:
    """One problem. ``kind`` is a :class:`ProblemKind`, or for a launch the error type that
    failed it (``RuntimeError``); ``phase``, ``checkpoint`` and ``rank`` say where, when known.
    A faulted launch's evidence stays with its fault (``PhaseRun.fault``), told once per
    launch."""

    area: Area
    kind: str
    text: str
    phase: int | None = None
    checkpoint: int | None = None
    rank: int | None = None

    def __str__(self) -> str:
        return self.text

    def in_phase(self, phase: int) -> Problem:
        """The problem an oracle found in one launch, as the scenario's launch ``phase``."""
        return replace(self, phase=phase, text=f"phase {phase}: {self.text}")

    def is_(self, area: Area, *kinds: str) -> bool:
        return self.area is area and (not kinds or self.kind in kinds)


@runtime_checkable
class OracleVerdict(Protocol):
    """The one shape of every oracle's verdict on a launch's records: ``ok``, whether they hold
    to the oracle's promise, and ``found()``, its problems as :class:`Problem` values (made
    where the oracle found them; none where it holds). A verdict keeps its own evidence
    beside (a first divergence, an outcome, counts) for its reports."""

    @property
    def ok(self) -> bool: ...

    def found(self) -> list[Problem]: ...


def found_in(phase: int, *verdicts: OracleVerdict | None) -> list[Problem]:
    """Every problem of ``verdicts`` in order (None: an oracle that did not judge), as the
    scenario's launch ``phase`` (:meth:`Problem.in_phase`); a problem its oracle already
    placed in a launch (its ``phase`` set) stays as made."""
    return [
        p if p.phase is not None else p.in_phase(phase)
        for verdict in verdicts
        if verdict is not None
        for p in verdict.found()
    ]


class OracleProblem(Protocol):
    """An oracle's own record of a problem: its evidence, a line for people, a :class:`Problem`."""

    def describe(self) -> str: ...

    def problem(self) -> Problem: ...


_P = TypeVar("_P", bound=OracleProblem)


class ProblemsVerdict(Generic[_P]):
    """An :class:`OracleVerdict` that keeps its oracle's own problem records: it holds when
    there are none, and tells them as lines and as :class:`Problem` values alike everywhere.
    A dataclass subclass declares the ``problems`` field itself."""

    problems: list[_P]

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        return [p.describe() for p in self.problems]

    def found(self) -> list[Problem]:
        return [p.problem() for p in self.problems]
