"""One verdict shape: every oracle's verdict holds or not and tells its problems through
``found()``; the part the verdicts keeping their own problem records share: ``ok``, ``lines``
and ``found``."""

from __future__ import annotations

from dataclasses import dataclass, field

from zephon_chaos.oracles.checkpoints import CheckpointVerdict
from zephon_chaos.oracles.dp_groups import GroupVerdict
from zephon_chaos.oracles.faults import FaultOutcome, FaultVerdict
from zephon_chaos.oracles.global_batches import Contract, Verdict
from zephon_chaos.oracles.healing import HealOutcome, HealVerdict
from zephon_chaos.oracles.liveness_model import LivenessBounds, LivenessVerdict
from zephon_chaos.oracles.policies import PolicyProblem, PolicyProblemKind, PolicyVerdict
from zephon_chaos.oracles.rank_draws import DrawVerdict
from zephon_chaos.problem import (
    Area,
    OracleVerdict,
    Problem,
    ProblemKind,
    ProblemsVerdict,
    found_in,
)


@dataclass(frozen=True)
class _Slow:
    seconds: float

    def describe(self) -> str:
        return f"slow by {self.seconds}s"

    def problem(self) -> Problem:
        return Problem(Area.LIVENESS, ProblemKind.UNBOUNDED_WAIT, self.describe())


@dataclass
class _Verdict(ProblemsVerdict[_Slow]):
    phase: int
    problems: list[_Slow] = field(default_factory=list)


def test_a_verdict_without_problems_holds_and_tells_nothing() -> None:
    verdict = _Verdict(0)
    assert verdict.ok and verdict.lines() == [] and verdict.found() == []


def test_a_verdict_tells_each_problem_as_a_line_and_as_a_problem() -> None:
    verdict = _Verdict(1, [_Slow(2.0), _Slow(3.5)])
    assert not verdict.ok
    assert verdict.lines() == ["slow by 2.0s", "slow by 3.5s"]
    assert [p.text for p in verdict.found()] == verdict.lines()
    assert all(p.is_(Area.LIVENESS, ProblemKind.UNBOUNDED_WAIT) for p in verdict.found())


def test_the_shared_part_stays_out_of_a_verdict_s_fields() -> None:
    verdict = PolicyVerdict(0, "skip", 1.0)
    verdict.problems.append(PolicyProblem(PolicyProblemKind.MISALIGNED, 0, 2))
    assert list(PolicyVerdict.__dataclass_fields__) == [
        "phase",
        "retry",
        "timeout_s",
        "rounds",
        "problems",
    ]
    assert not verdict.ok
    assert verdict.lines() == [verdict.problems[0].describe()]
    assert verdict.found() == [verdict.problems[0].problem()]


def test_every_oracle_s_verdict_has_the_one_shape() -> None:
    verdicts: list[OracleVerdict] = [
        Verdict(True, Contract.IDENTICAL),
        CheckpointVerdict(ok=True),
        FaultVerdict(FaultOutcome.COMPLETED, 0),
        HealVerdict(HealOutcome.RECOVERED),
        PolicyVerdict(0, "skip", 1.0),
        LivenessVerdict(0, 1.0, LivenessBounds()),
        DrawVerdict(),
        GroupVerdict(),
    ]
    for verdict in verdicts:
        assert isinstance(verdict, OracleVerdict), type(verdict)
        assert verdict.ok and verdict.found() == [], type(verdict)


def test_a_verdict_with_problems_tells_them_through_the_shape() -> None:
    made = Problem(Area.CHECKPOINT, ProblemKind.DIFFERS, "checkpoint 0 differs", checkpoint=0)
    fault = FaultVerdict(FaultOutcome.FINDING, 1)
    fault.add(ProblemKind.NO_RECORD, "no rank recorded checkpoint 1")
    verdicts: list[OracleVerdict] = [
        CheckpointVerdict(False, problems=[made]),
        fault,
        _Verdict(0, [_Slow(1.0)]),
    ]
    for verdict in verdicts:
        assert not verdict.ok and len(verdict.found()) == 1, type(verdict)
    assert fault.found() == [
        Problem(Area.FAULT, ProblemKind.NO_RECORD, "no rank recorded checkpoint 1", checkpoint=1)
    ]


def test_found_in_places_each_problem_in_its_launch_once() -> None:
    made = Problem(Area.CHECKPOINT, ProblemKind.DIFFERS, "checkpoint 0 differs", checkpoint=0)
    placed = Problem(Area.LIVENESS, ProblemKind.UNBOUNDED_WAIT, "phase 2: slow", phase=2)
    checkpoints = CheckpointVerdict(False, problems=[made, placed])
    slow = _Verdict(2, [_Slow(3.0)])
    assert found_in(2, checkpoints, None, slow) == [
        made.in_phase(2),
        placed,
        _Slow(3.0).problem().in_phase(2),
    ]
    assert found_in(0) == [] and found_in(0, None) == []
