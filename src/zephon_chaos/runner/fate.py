"""A launch's fate: how it ended, judged once, and what the next launch restores from it.

The scenario loop used to decide this in six exits of one loop body; here one function
returns a :class:`Fate` with the problems found on the way, and the loop acts on the fate.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from zephon_chaos.harness_problem import HarnessProblem
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.problem import Area, Problem, ProblemKind, found_in
from zephon_chaos.runner.checks import (
    crash_problems,
    expected_failure_problems,
    failed_launch,
    judged_by_resuming,
)
from zephon_chaos.runner.outcome import PhaseRun
from zephon_chaos.scenario import Scenario


class Fate(enum.Enum):
    """How a launch ended, and what that means for the next one."""

    REFUSED = "refused: the next launch restores what this one was given"
    FAULTED = "ended or failed by its fault: the next restores the last checkpoint that survived"
    LATE = (
        "failed by Zephon's per-call budget (a rank called checkpoint() later than "
        "aggregate_timeout_s after another): the next restores the last checkpoint every rank got"
    )
    CRASHED = "ended by its rank fault: the next restores the checkpoint due before the fault"
    SKIPPED = "every checkpoint failed and was skipped: the next restores what this one restored"
    DRIFTED = (
        "completed with no merged checkpoint every rank got alike (free-running ranks that "
        "retry alone gave one up or got different ones, each judged by resuming it): the "
        "next restores what this one restored"
    )
    FAILED = "failed although nothing was to fail it: the scenario ends here"
    NO_CHECKPOINT = "completed no checkpoint to restore from: the scenario ends here"
    LAST = "the last launch: everything it delivered is kept"
    RESUMED = "completed: the next restores its last checkpoint"

    @property
    def cut_short(self) -> bool:
        """The scenario ends at this launch, with no verdict on its batches."""
        return self in (Fate.FAILED, Fate.NO_CHECKPOINT)


@dataclass
class PhaseFate:
    """A launch's fate, the checkpoint (index) the next launch restores from it, if it
    hands one on, and the problems found deciding it."""

    fate: Fate
    keep: int | None = None
    problems: list[Problem] = field(default_factory=list)
    harness_problems: list[HarnessProblem] = field(default_factory=list)


def phase_fate(
    scenario: Scenario, run: PhaseRun, faults: Sequence[LaunchFault] = ()
) -> PhaseFate:
    """Judge launch ``run`` of ``scenario``: its faults' drivers judge in order (each set
    as ``run.fault`` and closed once it judged), and the first fate that applies is
    returned."""
    i, phase, result = run.index, run.phase, run.result
    c = scenario.canonical_replicas(i)
    if phase.expect_failure or phase.dp > c:
        problems, undescribed = expected_failure_problems(i, phase, result)
        return PhaseFate(Fate.REFUSED, None, problems, undescribed)
    found: list[Problem] = []
    survivor = run.restore_index
    for fault in faults:
        run.fault = fault
        found += fault.judge(run)
        fault.close()
        if fault.ends(run):
            return PhaseFate(Fate.FAULTED, survivor, found)
    if phase.rank_faults and not any(f.judges_rank_faults for f in faults):
        index = scenario.restore_index(i)
        crashed = crash_problems(run, index, c)
        return PhaseFate(Fate.CRASHED, None if crashed else index, found + crashed)
    assert run.policy is not None  # the runner judges the policy before the fate
    if not result.ok and not result.timed_out and run.policy.failed_by_arrival:
        return PhaseFate(Fate.LATE, survivor, found)
    checkpoints = found_in(i, run.checkpoints)
    last = i == len(scenario.launches) - 1
    if result.ok and phase.retry == "skip" and survivor is None and not last:
        return PhaseFate(Fate.SKIPPED, None, found + checkpoints)
    if not result.ok:
        return PhaseFate(Fate.FAILED, None, [*found, failed_launch(Area.LAUNCH, result, i)])
    if last:
        return PhaseFate(Fate.LAST, None, found + checkpoints)
    if survivor is None and judged_by_resuming(phase):
        # What the ranks got is judged by resuming it (runner.verify), and an on-time meeting
        # that got nothing by the policy oracle; a job restarts from its last common one.
        return PhaseFate(Fate.DRIFTED, None, found + checkpoints)
    if survivor is None:
        none = Problem(
            Area.CHECKPOINT,
            ProblemKind.NONE,
            f"phase {i} completed no checkpoint to restore from",
            i,
        )
        return PhaseFate(Fate.NO_CHECKPOINT, None, [*found, *checkpoints, none])
    return PhaseFate(Fate.RESUMED, survivor, found + checkpoints)
