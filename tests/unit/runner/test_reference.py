"""The reference run's failure: Zephon's problem when described, the harness's when not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.launch import GroupResult, LaunchSpec
from zephon_chaos.launch.result import RankOutcome
from zephon_chaos.problem import Area
from zephon_chaos.runner import ScenarioRunner
from zephon_chaos.runner.outcome import ScenarioOutcome
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import BEGAN_RECORD, RecordWriter
from zephon_chaos.workload.spec import PipelineSpec

SILENT = RankOutcome(0, 0, 0, None, None, unknown_because="its agent exited 1 before any rank")
DESCRIBED = RankOutcome(0, 0, 0, 4242, 1, error="RuntimeError: boom")


def judged_reference(
    tmp_path: Path,
    launcher: Callable[[LaunchSpec], GroupResult],
    harness: HarnessGap | None,
    area: Area | None,
) -> ScenarioOutcome:
    """A 2-rank scenario whose reference launch ``launcher`` fails: nothing else ran, and the
    failure is judged as the harness's (``harness``) or as a problem in ``area``."""
    scenario = Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(Launch(2, 2),))
    outcome = ScenarioRunner(tmp_path / "runs", launcher=launcher).run(scenario)
    assert not outcome.ok and outcome.phases == []
    assert [h.gap for h in outcome.harness_problems] == ([harness] if harness else [])
    assert [p.area for p in outcome.problems] == ([area] if area else [])
    return outcome


@pytest.mark.parametrize(
    ("first", "harness", "area"),
    [(None, HarnessGap.UNKNOWN_EXIT_STATUS, None), (DESCRIBED, None, Area.REFERENCE)],
    ids=["agent-died-before-any-rank", "a-rank-raised"],
)
def test_a_failed_reference_run_is_judged_only_when_the_harness_can_describe_it(
    tmp_path: Path, first: RankOutcome | None, harness: HarnessGap | None, area: Area | None
) -> None:
    def launcher(spec: LaunchSpec) -> GroupResult:
        ranks = [first or SILENT]
        return GroupResult(spec.name, [1], ranks, False, 0.1, tmp_path, [], first_failure=first)

    outcome = judged_reference(tmp_path, launcher, harness, area)
    if harness is not None:
        assert "harness problem (unknown-exit-status): the reference run failed" in (
            outcome.report()
        )


@pytest.mark.parametrize(
    ("began", "harness", "area"),
    [(False, HarnessGap.GROUP_NEVER_FORMED, None), (True, None, Area.REFERENCE)],
    ids=["hung-joining-its-group", "hung-after-its-ranks-began"],
)
def test_a_reference_run_that_hung_is_judged_only_once_its_ranks_began(
    tmp_path: Path, began: bool, harness: HarnessGap | None, area: Area | None
) -> None:
    """A hang before a rank's loop (torch's rendezvous, say) ran no code under test."""

    def launcher(spec: LaunchSpec) -> GroupResult:
        out = Path(spec.args[0]).parent
        for rank in range(2 if began else 1):  # rank 1 never began unless ``began``
            writer = RecordWriter(out, rank)
            writer.write(BEGAN_RECORD, at=0.0)
            writer.close()
        ranks = [RankOutcome(r, r, 0, 4242 + r, -9, killed_by_harness=True) for r in range(2)]
        return GroupResult(spec.name, [None], ranks, True, 9.0, tmp_path, [])

    outcome = judged_reference(tmp_path, launcher, harness, area)
    if harness is not None:
        assert "rank(s) [1] began" in outcome.report()
