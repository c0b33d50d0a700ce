"""A launch's fate, decided once: what ended it and what the next launch restores from it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.oracles.checkpoints import CheckpointFacts, CheckpointVerdict
from zephon_chaos.oracles.policies import PolicyVerdict
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import Fate, PhaseRun, phase_fate
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import (
    CheckpointAt,
    PipelineSpec,
    RankFault,
    RankLag,
    WorkloadSpec,
)


def completed(index: int) -> CheckpointFacts:
    return CheckpointFacts(index, [0, 1], {}, {0: "d", 1: "d"}, {0: 1, 1: 1}, {0: [0, 1]}, [])


def launch(
    tmp_path: Path, phase: Launch, ok: bool, taken: list[CheckpointFacts], index: int = 0
) -> PhaseRun:
    first = None if ok else RankOutcome(1, 1, 0, None, 1, error="RuntimeError: boom")
    result = GroupResult(
        "g", [0 if ok else 1], [first] if first else [], False, 1.0, tmp_path, [], first
    )
    spec = WorkloadSpec(steps=phase.steps, checkpoints=phase.checkpoints, out_dir=str(tmp_path))
    run = PhaseRun(index, phase, spec, result, [], CheckpointVerdict(True, taken))
    run.policy = PolicyVerdict(index, phase.retry, 2.0)
    return run


TWO = Launch(2, 2, (CheckpointAt(1), CheckpointAt(2)))


def scenario(*phases: Launch) -> Scenario:
    return Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=phases)


@pytest.mark.parametrize(
    ("phases", "index", "ok", "taken", "fate", "keep", "problem"),
    [
        ((TWO, TWO), 0, True, [completed(0), completed(1)], Fate.RESUMED, 1, None),
        ((TWO, TWO), 1, True, [completed(0), completed(1)], Fate.LAST, None, None),
        ((TWO, TWO), 0, True, [], Fate.NO_CHECKPOINT, None, (Area.CHECKPOINT, ProblemKind.NONE)),
        ((TWO, TWO), 0, False, [completed(0)], Fate.FAILED, None, (Area.LAUNCH, "RuntimeError")),
        (
            (TWO, Launch(3, 1, expect_failure=True)),
            1,
            True,
            [],
            Fate.REFUSED,
            None,
            (Area.REFUSAL, ProblemKind.ACCEPTED),
        ),
    ],
    ids=["resumed", "last", "no-checkpoint", "failed", "refused"],
)
def test_a_launch_has_one_fate_and_hands_on_what_survived(
    tmp_path: Path,
    phases: tuple[Launch, ...],
    index: int,
    ok: bool,
    taken: list[CheckpointFacts],
    fate: Fate,
    keep: int | None,
    problem: tuple[Area, str] | None,
) -> None:
    run = launch(tmp_path, phases[index], ok, taken, index)
    judged = phase_fate(scenario(*phases), run)
    assert (judged.fate, judged.keep) == (fate, keep)
    assert [(p.area, p.kind) for p in judged.problems] == ([problem] if problem else [])
    assert all(p.phase == index for p in judged.problems)
    assert judged.fate.cut_short == (fate in (Fate.FAILED, Fate.NO_CHECKPOINT))


def drifted() -> list[CheckpointFacts]:
    """Ranks one interval apart: each got the same merged checkpoint under another index and
    gave the other index up (``RankLag.by`` 1 under ``independent`` retry)."""
    return [
        CheckpointFacts(0, [1], {0: "gave up"}, {1: "d"}, {0: 1, 1: 1}, {1: [0, 1]}, []),
        CheckpointFacts(1, [0], {1: "gave up"}, {0: "d"}, {0: 2, 1: 1}, {0: [0, 1]}, []),
    ]


@pytest.mark.parametrize("taken", [[], drifted()], ids=["gave-up", "drifted"])
def test_free_running_ranks_with_no_checkpoint_alike_hand_on_what_they_restored(
    tmp_path: Path, taken: list[CheckpointFacts]
) -> None:
    """Judged by resuming (independent retry beside a lag), a launch whose ranks got no merged
    checkpoint alike ends as a job's does: the next restores the last every rank got before."""
    free = replace(
        TWO, retry="independent", sync="free", lags=(RankLag(1, checkpoint=0, by=len(taken) // 2),)
    )
    judged = phase_fate(scenario(free, TWO), launch(tmp_path, free, True, taken))
    assert (judged.fate, judged.keep, judged.problems) == (Fate.DRIFTED, None, [])
    assert not judged.fate.cut_short


class ToyFault(LaunchFault):
    """A driver of no real kind: the fate judges it through the protocol alone."""

    def __init__(self, ending: bool, rank_faults: bool = False) -> None:
        self.ending = ending
        self.judges_rank_faults = rank_faults  # type: ignore[misc]
        self.steps: list[str] = []

    def prepare(self, spec: WorkloadSpec) -> WorkloadSpec:
        return spec

    def judge(self, run: PhaseRun) -> list[Problem]:
        self.steps.append("judge")
        return [Problem(Area.FAULT, ProblemKind.NO_EVIDENCE, "toy", run.index)]

    def ends(self, run: PhaseRun) -> bool:
        return self.ending

    def close(self) -> None:
        self.steps.append("close")


@pytest.mark.parametrize("ending", [True, False], ids=["ends-the-launch", "leaves-it"])
def test_the_fate_judges_any_driver_through_the_fault_protocol(
    tmp_path: Path, ending: bool
) -> None:
    """Each driver judges, is closed, and, where it ended the failed launch, the next
    restores the last surviving checkpoint; later drivers are not asked."""
    first, second = ToyFault(ending), ToyFault(False)
    run = launch(tmp_path, TWO, False, [completed(0)])
    judged = phase_fate(scenario(TWO, TWO), run, (first, second))
    assert first.steps == ["judge", "close"]
    assert second.steps == ([] if ending else ["judge", "close"])
    assert run.fault is (first if ending else second)
    assert judged.fate is (Fate.FAULTED if ending else Fate.FAILED)
    assert judged.keep == (0 if ending else None)
    assert judged.problems[0].text == "toy"


@pytest.mark.parametrize("covered", [True, False], ids=["driver-judges-them", "crash"])
def test_a_rank_fault_no_driver_judges_is_a_crash(tmp_path: Path, covered: bool) -> None:
    crashing = replace(TWO, rank_faults=(RankFault(1, 1, "raise"),))
    run = launch(tmp_path, crashing, True, [completed(0), completed(1)])
    judged = phase_fate(scenario(crashing, TWO), run, (ToyFault(False, rank_faults=covered),))
    assert (judged.fate is Fate.CRASHED) != covered
