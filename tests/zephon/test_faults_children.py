"""Child faults on real torchrun groups: a rank SIGKILLs its pipeline's worker processes
(``runner: process``), as an OOM killer would, and draws on.

Zephon's watchdog is to replace the workers and re-dispatch their work, so the global
batches stay those of an uninterrupted run, and a relaunch from the checkpoint taken after
the kill (at another world size) continues every lane exactly. Each test proves the fault
acted: the rank's own record of the PIDs it killed, and of the live workers it had at its
last batch (replacements, for a kill in the middle of the launch).
"""

from __future__ import annotations

from typing import Any

import pytest

from zephon_chaos.explore.known import KILLED_WORKER_ORPHANS_QUEUE_LOCK, explaining, judged_ok
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import normalised
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, WORKERS_RECORD
from zephon_chaos.workload.spec import (
    CheckpointAt,
    ChildFault,
    DataSpec,
    PipelineSpec,
    SourceSpec,
)

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

VICTIM = 1


def killed_workers(at_step: int) -> Scenario:
    """G 2 -> 1 over C = 4 lanes of endless data; rank 1 kills its workers before
    ``at_step`` (normalising gives a mid-launch kill the steps its replacements need)."""
    scenario = Scenario(
        data=DataSpec(sources=(SourceSpec("a", shards=(40, 40, 40, 40), exhausted="repeat"),)),
        pipeline=PipelineSpec(canonical_replicas=4, runner="process"),
        launches=(
            Launch(
                2,
                5,
                (CheckpointAt(5),),
                child_faults=(ChildFault(VICTIM, at_step),),
            ),
            Launch(1, 3),
        ),
        name=f"workers-killed-at-{at_step}",
    )
    return normalised(scenario).validate()


def child_events(outcome: Any, kind: str) -> list[dict[str, Any]]:
    """The victim's events of ``kind`` in the killing launch."""
    run = outcome.phases[0]
    return [
        ev for rec in run.records if rec.rank == VICTIM for ev in rec.events if ev["kind"] == kind
    ]


def test_workers_killed_mid_launch_are_replaced_and_every_lane_continues_exactly(
    resume_check,
) -> None:
    """Unless a killed worker was waiting for its next command: then the launch hangs with
    the known defect killed-worker-orphans-task-queue-lock (its task queue's lock held for
    good, docs/findings.md), which the explorer reached this way, and nothing else is
    allowed."""
    scenario = killed_workers(at_step=2)
    assert scenario.launches[0].steps > 5  # drawn on past what Zephon's buffers hold
    outcome = resume_check(scenario)
    (kill,) = child_events(outcome, CHILD_FAULT_RECORD)
    assert kill["killed"], kill
    if explaining(outcome) == [KILLED_WORKER_ORPHANS_QUEUE_LOCK]:
        assert judged_ok(outcome), outcome.report()
        return
    assert outcome.ok, outcome.report()
    (alive,) = child_events(outcome, WORKERS_RECORD)
    assert set(alive["pids"]) - set(kill["killed"]), (kill, alive)


@pytest.mark.slow
def test_workers_killed_at_the_last_step_leave_the_checkpoint_and_the_close_whole(
    resume_check,
) -> None:
    """Killed right before the launch's last checkpoint and the pipeline's close, where the
    consumer stops drawing: the known idle-worker defect (docs/findings.md) may hang the close,
    and is the only thing allowed to."""
    scenario = killed_workers(at_step=5)
    assert scenario.launches[0].steps == 5
    outcome = resume_check(scenario)
    assert judged_ok(outcome), outcome.report()
    (kill,) = child_events(outcome, CHILD_FAULT_RECORD)
    assert kill["killed"], kill


HUNG_DEADLINE_S = 360.0
"""The explorer's deadline of a launch with worker processes (120 s x 3)."""
QUIET_S = 20.0
"""Short of the default (``runner.hangs.quiet_period_s``: 163 s at T = 30 s), so the test
shows the cut within minutes; the default's own cost is ``benchmarks/known_hang_cost.py``'s."""


@pytest.mark.slow
def test_a_launch_hung_by_the_orphaned_queue_lock_is_cut_short_as_that_known_defect(
    resume_check,
) -> None:
    """With the known hangs injected, as the explorer injects them, a launch hung by a killed
    idle worker ends once quiet and recognised, well before its deadline, and is judged as
    that known defect alone. The defect is met by timing: a run whose killed workers were
    busy has no hang to cut (skipped)."""
    from zephon_chaos.explore.known import HANG_SIGNATURES
    from zephon_chaos.explore.signature import signature

    resume_check.runner.deadline_s = HUNG_DEADLINE_S
    resume_check.runner.hang_signatures = HANG_SIGNATURES
    resume_check.runner.hang_quiet_s = QUIET_S
    outcome = resume_check(killed_workers(at_step=2))
    result = outcome.phases[0].result
    if not result.timed_out:
        assert outcome.ok, outcome.report()
        pytest.skip("the killed workers were busy: the orphaned lock was not met this time")
    cut = result.cut_short
    assert cut is not None and cut.defect == KILLED_WORKER_ORPHANS_QUEUE_LOCK.id, result.summary()
    assert result.duration_s < HUNG_DEADLINE_S / 2, result.summary()
    assert cut.quiet_s >= QUIET_S
    assert explaining(outcome) == [KILLED_WORKER_ORPHANS_QUEUE_LOCK]
    assert judged_ok(outcome), outcome.report()
    assert signature(outcome) == f"known.{KILLED_WORKER_ORPHANS_QUEUE_LOCK.id}"
