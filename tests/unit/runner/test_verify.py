"""Judging by resuming (``runner.verify``): which merged checkpoints are resumed, on which world
sizes, from which positions, and the verdict of a verification launch, from fake records."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.oracles.checkpoints import CheckpointVerdict
from zephon_chaos.problem import Area, ProblemKind
from zephon_chaos.runner.outcome import PhaseRun, ScenarioOutcome
from zephon_chaos.runner.verify import (
    MAX_CHECKPOINTS,
    VERIFY_STEPS,
    Returned,
    Target,
    judge,
    judged_by_resuming,
    plan,
    reference_margin,
    verify_run,
    verify_worlds,
)
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import Batch, CheckpointEvent, RankRecord
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankLag, WorkloadSpec

CHECKPOINTS = (CheckpointAt(1), CheckpointAt(2), CheckpointAt(3))
DRIFTED = Launch(
    2, 3, CHECKPOINTS, retry="independent", sync="free", lags=(RankLag(1, checkpoint=0, by=1),)
)


def event(index: int, digest: str | None, lane: int, count: int) -> CheckpointEvent:
    return CheckpointEvent(index, count, digest is not None, {lane: count}, digest)


def rank(r: int, *events: CheckpointEvent, batches: list[Batch] | None = None) -> RankRecord:
    return RankRecord(r, 2, [r], checkpoints=list(events), batches=batches or [])


def drifted_records() -> list[RankRecord]:
    """What the torchrun scenario's ranks record: rank 0 gave checkpoint 0 up; rank 1's late
    calls joined the leader's rounds of its next checkpoints (one lane each, C=2)."""
    return [
        rank(0, event(0, None, 0, 1), event(1, "D1", 0, 2), event(2, "D2", 0, 3)),
        rank(1, event(0, "D1", 1, 1), event(1, "D2", 1, 2), event(2, None, 1, 3)),
    ]


def phase_run(tmp_path: Path, records: list[RankRecord], phase: Launch = DRIFTED) -> PhaseRun:
    spec = WorkloadSpec(
        steps=3, checkpoints=CHECKPOINTS, out_dir=str(tmp_path / "phase0"), retry="independent"
    )
    Path(spec.out_dir).mkdir()
    result = GroupResult("g", [0], [], False, 1.0, tmp_path, [])
    return PhaseRun(0, phase, spec, result, records, CheckpointVerdict(True))


def persisted(run: PhaseRun, *held: tuple[int, int]) -> None:
    """Each (index, rank) kept its copy, as ``WorkloadSpec.keeps_own_copy`` makes it."""
    for index, r in held:
        run.spec.rank_checkpoint_path(index, r).write_bytes(b"ckpt")


@pytest.mark.parametrize(
    ("phase", "judged"),
    [
        (DRIFTED, True),
        (Launch(2, 3, CHECKPOINTS, retry="skip", sync="free", lags=(RankLag(1),)), False),
        (Launch(2, 3, CHECKPOINTS, retry="independent", sync="free"), False),
        (Launch(2, 3, CHECKPOINTS), False),
    ],
    ids=["independent-beside-a-lag", "skip-beside-a-lag", "independent-alone", "lockstep"],
)
def test_only_ranks_that_retry_alone_beside_a_lag_are_judged_by_resuming(
    phase: Launch, judged: bool
) -> None:
    assert judged_by_resuming(phase) is judged
    scenario = Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(phase,))
    assert reference_margin(scenario) == (VERIFY_STEPS if judged else 0)


def test_each_distinct_checkpoint_is_resumed_from_where_its_ranks_stood(tmp_path: Path) -> None:
    run = phase_run(tmp_path, drifted_records())
    persisted(run, (1, 0), (2, 0), (0, 1), (1, 1))
    planned = plan(run, 2, None)
    returned = list(dict.fromkeys(t.returned for t in planned.targets))
    assert [(r.digest, r.index, r.rank) for r in returned] == [("D1", 0, 1), ("D2", 1, 1)]
    assert [dict(r.positions) for r in returned] == [{0: 2, 1: 1}, {0: 3, 1: 2}]
    assert returned[0].got == ((1, 0), (0, 1))
    also = "(also rank 0's checkpoint 1)"
    assert returned[0].describe() == f"checkpoint 0 as returned to rank 1 {also}"
    assert all(r.mid_window for r in returned)
    assert [(t.world_size, t.tp) for t in planned.targets[:2]] == [(2, 1), (1, 1)]
    assert not planned.unjudged and not planned.problems


def test_a_checkpoint_without_a_copy_or_past_the_bound_is_told_not_resumed(
    tmp_path: Path,
) -> None:
    records = [
        rank(0, *(event(i, f"D{i}", 0, i + 1) for i in range(3))),
        rank(1, *(event(i, f"D{i}", 1, i + 1) for i in range(3))),
    ]
    run = phase_run(tmp_path, records)
    persisted(run, (0, 0), (1, 0))
    planned = plan(run, 2, None)
    assert len({t.returned.digest for t in planned.targets}) == MAX_CHECKPOINTS
    assert [(u.digest, u.why) for u in planned.unjudged] == [
        ("D2", "no rank's copy of it is on disk")
    ]


def test_one_checkpoint_returned_at_two_positions_of_a_lane_is_a_problem(tmp_path: Path) -> None:
    records = [rank(0, event(0, "D", 0, 1)), rank(1, event(0, "D", 1, 1))]
    records[1].checkpoints.append(CheckpointEvent(1, 2, True, {0: 5}, "D"))
    run = phase_run(tmp_path, records)
    persisted(run, (0, 0))
    problems = plan(run, 2, None).problems
    assert [(p.area, p.kind, p.rank) for p in problems] == [
        (Area.VERIFY, ProblemKind.INCONSISTENT, 1)
    ]


def test_nothing_is_planned_for_a_launch_not_judged_by_resuming(tmp_path: Path) -> None:
    run = phase_run(tmp_path, drifted_records(), Launch(2, 3, CHECKPOINTS))
    assert plan(run, 2, None).targets == ()


@pytest.mark.parametrize(
    ("world", "c", "following", "expected"),
    [
        (2, 2, None, [(2, 1), (1, 1)]),
        (1, 2, None, [(1, 1), (2, 1)]),
        (2, 4, Launch(3, 1), [(2, 1), (3, 1)]),
        (2, 4, Launch(2, 1), [(2, 1), (1, 1)]),
        (2, 2, Launch(3, 1, expect_failure=True), [(2, 1), (1, 1)]),
        (1, 1, None, [(1, 1)]),
    ],
    ids=["one-fewer", "one-more", "the-next-launch", "next-is-the-same", "next-refused", "none"],
)
def test_a_checkpoint_is_resumed_on_its_own_world_size_and_another(
    world: int, c: int, following: Launch | None, expected: list[tuple[int, int]]
) -> None:
    assert verify_worlds(Launch(world, 3, CHECKPOINTS), c, following) == expected


def batches(lane: int, ids: list[int]) -> list[Batch]:
    return [Batch(n, lane, [(lane, i, 0)], 0) for n, i in enumerate(ids)]


def reference() -> list[RankRecord]:
    return [rank(r, batches=batches(r, list(range(8)))) for r in (0, 1)]


def target(positions: dict[int, int], world: int = 2) -> Target:
    got = ((0, 0),)
    return Target(Returned("D", 0, 0, Path("ckpt"), positions, got), world)


def test_a_resume_that_picks_up_each_lane_where_it_stood_holds() -> None:
    resumed = [rank(0, batches=batches(0, [2, 3])), rank(1, batches=batches(1, [1, 2]))]
    verdict = judge(target({0: 2, 1: 1}), resumed, reference(), relaid=False)
    assert verdict.ok, verdict.describe()


def test_a_resume_that_aligns_the_lanes_is_a_verify_problem() -> None:
    resumed = [rank(0, batches=batches(0, [2, 3])), rank(1, batches=batches(1, [2, 3]))]
    verdict = judge(target({0: 2, 1: 1}), resumed, reference(), relaid=False)
    assert not verdict.ok
    assert {p.area for p in verdict.problems} == {Area.VERIFY}


def test_the_runner_records_each_verification_launch_and_its_verdict(tmp_path: Path) -> None:
    """One call of ``verify_run`` launches each planned target (a fake launcher writes no
    records, so each group 'ran' nothing: each verdict then finds the lanes short)."""
    run = phase_run(tmp_path, drifted_records())
    persisted(run, (1, 0), (2, 0), (0, 1), (1, 1))
    scenario = Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(DRIFTED,))
    outcome = ScenarioOutcome(scenario, None)
    launched: list[tuple[str, int, str | None]] = []

    def launch(name: str, spec: WorkloadSpec, world: int) -> GroupResult:
        launched.append((name, world, spec.restore_from))
        return GroupResult(name, [0], [], False, 1.0, tmp_path, [])

    verify_run(launch, scenario, run, reference(), outcome)
    assert [(n.rpartition("-")[2], w) for n, w, _ in launched] == [
        ("verify0", 2),
        ("verify1", 1),
        ("verify2", 2),
        ("verify3", 1),
    ]
    assert launched[0][2] == str(run.spec.rank_checkpoint_path(0, 1))
    assert len(outcome.verifications) == 4
    assert all(p.area is Area.VERIFY for p in outcome.problems) and outcome.problems
