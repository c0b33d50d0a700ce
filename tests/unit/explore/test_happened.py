"""What happened, per launch and rank, built from synthetic records and verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.explore import synthetic
from tests.unit.explore.synthetic import CLOCK, HUNG_S, TIMED_OUT, T
from zephon_chaos.explore.happened import (
    Attempt,
    ExitKind,
    Fault,
    FaultSource,
    Outcome,
    happened,
    planned,
)
from zephon_chaos.workload.spec import ChildFault


def test_a_failed_attempt_carries_its_cause_its_duration_and_its_bounds(tmp_path: Path) -> None:
    model = happened(synthetic.failed_checkpoint(tmp_path))
    (launch,) = model.launches
    first, second = (lane.attempts for lane in launch.ranks)
    assert first[0].outcome is Outcome.COMPLETED
    assert first[1] == Attempt(
        1, 1, Outcome.FAILED, pytest.approx(0.4), pytest.approx(T + 0.2), T, TIMED_OUT,
        liveness_bound_s=3 * T + 3, over_liveness=False,
    )  # fmt: skip
    assert first[1].cause_type == "RuntimeError"
    assert second[1].seconds == pytest.approx(HUNG_S)
    assert (second[1].over_liveness, second[1].liveness_bound_s) == (True, 18.0)
    assert [lane.exit.kind for lane in launch.ranks] == [ExitKind.ERROR, ExitKind.ERROR]
    assert launch.ranks[0].exit.error_type == "RuntimeError"
    assert launch.ranks[0].exit.at_s == pytest.approx(21.0)
    assert (launch.ok, launch.first_failure) == (False, 0)


def test_a_rank_killed_by_sigkill_shows_as_such_and_its_fault_where_it_fired(
    tmp_path: Path,
) -> None:
    model = happened(synthetic.sigkill(tmp_path))
    (launch,) = model.launches
    stopped, killed = launch.ranks
    assert killed.exit.kind is ExitKind.SIGNAL
    assert (killed.exit.signal, killed.exit.scheduled) == ("SIGKILL", True)
    assert killed.faults == (Fault(FaultSource.RANK, "sigkill", pytest.approx(0.5), step=2),)
    assert stopped.exit.kind is ExitKind.STOPPED
    assert launch.unfired == (ChildFault(0, 3),)


def test_a_launch_past_its_deadline_shows_its_ranks_hung(tmp_path: Path) -> None:
    (launch,) = happened(synthetic.hung(tmp_path)).launches
    assert launch.timed_out
    assert {lane.exit.kind for lane in launch.ranks} == {ExitKind.DEADLINE}
    assert {lane.exit.at_s for lane in launch.ranks} == {None}


def test_retried_calls_are_discarded_or_skipped_as_the_policy_recorded(tmp_path: Path) -> None:
    (launch,) = happened(synthetic.retried(tmp_path)).launches
    lockstep, skip = ([a.outcome for a in lane.attempts] for lane in launch.ranks)
    assert lockstep == [Outcome.DISCARDED, Outcome.COMPLETED]
    assert skip == [Outcome.SKIPPED]
    assert launch.ranks[1].attempts[0].cause == TIMED_OUT


def test_a_batch_violation_gives_the_divergent_step_its_batch_and_the_lanes(
    tmp_path: Path,
) -> None:
    model = happened(synthetic.batch_violation(tmp_path))
    b = model.batches
    assert b is not None
    assert (b.step, b.lane, b.kind) == (2, 0, "missing")
    assert (dict(b.lost), dict(b.repeated)) == ({0: 1}, {0: 1})
    # global step 2 of lane 0 is the second launch's first batch on rank 0
    assert b.at == (1, 0, pytest.approx(0.11))
    first, second = model.launches
    assert second.restored == (0, 0)
    assert [lane.kept for lane in first.ranks] == [2, 2]
    assert [lane.kept for lane in second.ranks] == [2, 2]


def test_a_passing_outcome_has_no_batch_violation(tmp_path: Path) -> None:
    outcome = synthetic.batch_violation(tmp_path)
    outcome.verdict = None
    assert happened(outcome).batches is None


def test_times_count_from_the_launch_s_first_record(tmp_path: Path) -> None:
    outcome = synthetic.failed_checkpoint(tmp_path)
    for rec in outcome.phases[0].records:
        rec.events[0]["at"] = CLOCK - 1.0
    (launch,) = happened(outcome).launches
    assert launch.ranks[0].attempts[0].start_s == pytest.approx(1.2)


def test_interposer_events_are_round_faults_at_their_point(tmp_path: Path) -> None:
    outcome = synthetic.sigkill(tmp_path)
    fired = {"kind": "fired", "t": CLOCK + 0.3, "action": "toxic", "phase": "announce", "n": 1,
             "proxy": {"type": "reset_peer"}}  # fmt: skip
    model = happened(outcome, lambda run, rank: [fired] if rank == 0 else [])
    assert model.launches[0].ranks[0].faults == (
        Fault(FaultSource.ROUND, "reset_peer", pytest.approx(0.3), point=("announce", 1)),
    )


def test_a_scenario_that_did_not_run_is_drawn_as_planned() -> None:
    outcome = synthetic.sigkill(Path("."))
    model = planned(outcome.scenario)
    (launch,) = model.launches
    assert not launch.ran
    assert [lane.rank for lane in launch.ranks] == [0, 1]
    assert all(not lane.attempts and not lane.batches for lane in launch.ranks)
    assert len(launch.unfired) == 2


def test_launches_after_the_scenario_ended_are_kept_as_planned(tmp_path: Path) -> None:
    outcome = synthetic.batch_violation(tmp_path)
    outcome.phases, outcome.verdict = outcome.phases[:1], None
    first, second = happened(outcome).launches
    assert (first.ran, second.ran) == (True, False)
    assert second.ranks[0].batches == ()
