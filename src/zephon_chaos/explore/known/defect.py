"""What every known defect is made of, and the readings of an outcome several of them share.

A defect's ``explains`` predicate reads the kind and the place of a problem, then the records
of the launch it was found in; the helpers here are those first steps, so each defect's module
says only what is its own.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import PhaseRun, ScenarioOutcome
from zephon_chaos.runner.hangs import HangSignature


class KnownKind(enum.Enum):
    """What a known explanation is: the signature's prefix."""

    DEFECT = "known"
    """Zephon breaks what it promises: pinned by a strict xfail, fixed upstream."""
    LIMITATION = "limitation"
    """Zephon does what it documents, and a default recipe pays for it: reported with its
    consequence and the recipe-side mitigation, failing neither ``explore`` nor CI."""


@dataclass(frozen=True)
class KnownDefect:
    id: str
    summary: str
    evidence: str
    explains: Callable[[ScenarioOutcome, Problem], bool]
    kind: KnownKind = KnownKind.DEFECT
    consequence: str = ""
    """For a limitation: what a recipe loses when it meets it."""
    mitigation: str = ""
    """For a limitation: what a recipe can do, and the test that shows it works."""
    hang: HangSignature | None = None
    """For a defect that hangs its launch until the deadline: its trigger and the frames that
    identify it while the launch runs, so the launch is cut short once it is quiet
    (``runner.hangs``). Its frames are the ones ``explains`` reads at the deadline."""


def run_of(outcome: ScenarioOutcome, problem: Problem) -> PhaseRun | None:
    """The launch ``problem`` was found in."""
    return next((r for r in outcome.phases if r.index == problem.phase), None)


def launch_failed(problem: Problem) -> bool:
    """A launch that failed: unexpectedly, before its scheduled rank fault fired, or not with
    the error a refusal names; or, in a faulted launch, a rank whose error is not the fault's
    cause, or a fault that never fired (the launch failed before its point)."""
    return (
        problem.area is Area.LAUNCH
        or problem.is_(Area.CRASH, ProblemKind.EARLY_FAILURE)
        or problem.is_(Area.REFUSAL, ProblemKind.WRONG_ERROR)
        or problem.is_(Area.FAULT, ProblemKind.NO_CAUSE, ProblemKind.NO_EVIDENCE)
    )


def over_bound(problem: Problem) -> bool:
    """A faulted round's attempt, or a wait, longer than its bound."""
    return problem.is_(Area.FAULT, ProblemKind.SLOW_FAILURE) or problem.is_(
        Area.LIVENESS, ProblemKind.UNBOUNDED_WAIT
    )
