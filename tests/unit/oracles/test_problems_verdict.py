"""The part the policy and liveness verdicts share: ``ok``, ``lines`` and ``found``."""

from __future__ import annotations

from dataclasses import dataclass, field

from zephon_chaos.oracles.policies import PolicyProblem, PolicyProblemKind, PolicyVerdict
from zephon_chaos.problem import Area, Kind, Problem, ProblemsVerdict


@dataclass(frozen=True)
class _Slow:
    seconds: float

    def describe(self) -> str:
        return f"slow by {self.seconds}s"

    def problem(self) -> Problem:
        return Problem(Area.LIVENESS, Kind.UNBOUNDED_WAIT, self.describe())


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
    assert all(p.is_(Area.LIVENESS, Kind.UNBOUNDED_WAIT) for p in verdict.found())


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
