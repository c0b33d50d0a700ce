"""``killed-worker-orphans-task-queue-lock`` explains a hang only where the launch's child
fault killed a worker (its trigger), not where one was scheduled and killed nothing."""

from __future__ import annotations

from types import SimpleNamespace

from tests.unit.explore.test_known import LAUNCH_TIMEOUT, PYSPY_WEDGED, _wedged
from zephon_chaos.explore.known import KILLED_WORKER_ORPHANS_QUEUE_LOCK
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, RankRecord


def test_a_wedged_launch_whose_child_fault_killed_nothing_is_not_the_orphaned_lock() -> None:
    """The child fault was scheduled, and its record shows it killed no worker (or there is
    none): the stacks alone do not make the defect."""
    outcome = _wedged(PYSPY_WEDGED)
    assert KILLED_WORKER_ORPHANS_QUEUE_LOCK.explains(outcome, LAUNCH_TIMEOUT)  # type: ignore[arg-type]
    run = outcome.phases[0]  # type: ignore[attr-defined]
    for records in ([], [RankRecord(0, events=[{"kind": CHILD_FAULT_RECORD, "killed": []}])]):
        unfired = SimpleNamespace(**{**vars(run), "records": records})
        outcome.phases[0] = unfired  # type: ignore[attr-defined]
        assert not KILLED_WORKER_ORPHANS_QUEUE_LOCK.explains(outcome, LAUNCH_TIMEOUT)  # type: ignore[arg-type]
