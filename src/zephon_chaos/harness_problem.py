"""A failure the harness could not describe: the harness's own problem, never Zephon's.

When a launch fails and the harness cannot say how (no rank is known to have failed, or the
first failure left no error message), judging the code under test from it would invent a
finding. Such a failure is kept as a typed problem of its own; the explorer reports it under
the ``harness`` area, apart from violations (as it reports a scenario the harness raised on:
``harness.<exception type>``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zephon_chaos.launch.result import GroupResult

HARNESS_AREA = "harness"
"""The signature area of every harness problem: ``harness.<gap>.<topology>.<window>``."""


class HarnessGap(enum.Enum):
    """What the harness could not tell about a failure; the value is the signature's kind."""

    UNKNOWN_EXIT_STATUS = "unknown-exit-status"
    """The launch failed, but no rank is known to have failed (its agent crashed or fell
    silent, so every exit status is unknown)."""
    NO_ERROR_MESSAGE = "no-error-message"
    """The first failure exited with a status but left no message: no error file, no
    exception line on its stderr."""
    GROUP_NEVER_FORMED = "group-never-formed"
    """The launch passed its deadline before every rank began its loop: a rank was still in
    torch's rendezvous (``init_process_group``) or the harness's own set-up, where no code
    under test runs, so the hang is not the code under test's."""
    CHILD_FAULT_MISSED = "child-fault-missed"
    """A launch that completed has a child fault that found no worker process to kill, or
    left no record: the launch tested nothing of what its scenario says."""
    CHANGED_BETWEEN_LAUNCHES = "changed-between-launches"
    """Zephon's state outside the launches (the hosted store's keys, the aggregation
    directory's files) changed between two launches with no step of the scenario's
    deployment to change it: the harness repaired what a real job would leave."""


@dataclass(frozen=True)
class HarnessProblem:
    gap: HarnessGap
    detail: str

    def describe(self) -> str:
        return f"harness problem ({self.gap.value}): {self.detail}"


def undescribed_failure(what: str, result: GroupResult) -> HarnessProblem | None:
    """The harness problem in a failed launch whose first failure it cannot describe, if any.

    A rank killed by a signal is described by its status; a rank that exited with a status
    and said nothing, or a launch with no known failed rank, is not.
    """
    if result.ok or result.timed_out:
        return None
    first = result.first_failure
    if first is None or first.killed_by_harness:  # torn down: its status is the harness's kill
        statuses = "; ".join(f"rank {r.rank}: {r.status}" for r in result.ranks)
        return HarnessProblem(
            HarnessGap.UNKNOWN_EXIT_STATUS,
            f"{what} failed, but no rank is known to have failed ({statuses or 'none'})",
        )
    if first.error is None and first.exitcode is not None and first.exitcode > 0:
        return HarnessProblem(
            HarnessGap.NO_ERROR_MESSAGE,
            f"{what}: rank {first.rank} failed first ({first.status}) and left no "
            "error message (no error file, no exception line on its stderr)",
        )
    return None
