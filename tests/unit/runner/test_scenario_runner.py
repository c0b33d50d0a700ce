"""The runner launches each phase under the deadline its reference run's timing gives
(``runner.deadlines``), keeps that timing with the cached reference, and the report of a
launch that passed its deadline says why the deadline was what it was."""

from __future__ import annotations

import time
from pathlib import Path

from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.launch import GroupResult, LaunchSpec
from zephon_chaos.launch.launch_spec import Formation
from zephon_chaos.launch.result import RankOutcome
from zephon_chaos.runner import ScenarioRunner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import BEGAN_RECORD, RecordWriter
from zephon_chaos.workload.spec import PipelineSpec

FLAT_S = 120.0


class Launches:
    """A launcher whose reference runs draw one batch per rank at once and whose phases hang,
    before their ranks began or (``began``) after; it keeps each launch's name and deadline."""

    def __init__(self, workdir: Path, began: bool = False) -> None:
        self.workdir = workdir
        self.began = began
        self.seen: list[tuple[str, float]] = []
        self.formations: list[Formation | None] = []

    def __call__(self, spec: LaunchSpec) -> GroupResult:
        self.seen.append((spec.name, spec.deadline_s))
        self.formations.append(spec.formation)
        ranks = [RankOutcome(r, r, 0, 4242 + r, 0) for r in range(spec.nproc)]
        reference = spec.name.endswith("reference")
        out = Path(spec.args[0]).parent
        for rank in range(spec.nproc if reference or self.began else 0):
            now = time.monotonic()
            writer = RecordWriter(out, rank)
            writer.write(BEGAN_RECORD, at=now)
            writer.write("start", rank=rank, world=spec.nproc, lanes=[rank])
            if reference:
                writer.write("batch", i=0, lane=rank, ids=[], ckpts=0, fetch_at=now, fetch_s=0.01)
            writer.close()
        if not reference:
            return GroupResult(spec.name, [None], ranks, True, spec.deadline_s, self.workdir, [])
        return GroupResult(spec.name, [0], ranks, False, 0.1, self.workdir, [])


SCENARIO = Scenario(
    pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=2.0), launches=(Launch(2, 1),)
)


def test_a_phase_runs_under_its_derived_deadline_and_a_hang_says_why(tmp_path: Path) -> None:
    launches = Launches(tmp_path)
    runner = ScenarioRunner(tmp_path / "runs", launcher=launches, deadline_s=FLAT_S)
    first = runner.run(SCENARIO)
    second = runner.run(SCENARIO)
    names = [name.rpartition("-")[2] for name, _ in launches.seen]
    assert names == ["reference", "phase0", "phase0"], "the reference's timing was cached"
    [reference] = runner.reference_cache.values()
    assert reference.timing is not None and reference.timing.ranks == 2
    assert launches.seen[0][1] == FLAT_S, "nothing measured yet: the flat deadline"
    for outcome, (_, deadline_s) in zip((first, second), launches.seen[1:], strict=True):
        assert deadline_s < FLAT_S / 2, "a launch of 0.1 s with a 2 s timeout"
        [problem] = outcome.harness_problems
        assert problem.gap is HarnessGap.GROUP_NEVER_FORMED
        said = problem.describe()
        assert f"\nits group never formed: {FLAT_S:.0f}s to form from the start" in said
        assert f"had it formed, deadline {deadline_s:.0f}s = 3 x expected" in said
        [unformed] = outcome.unformed  # judged as nothing, kept as the triage's evidence
        assert unformed.timed_out and unformed.name.endswith("phase0") and not outcome.phases


def test_the_report_of_a_launch_that_hung_says_why_its_deadline_was_that_long(
    tmp_path: Path,
) -> None:
    launches = Launches(tmp_path, began=True)
    outcome = ScenarioRunner(tmp_path / "runs", launcher=launches, deadline_s=FLAT_S).run(SCENARIO)
    [run] = outcome.phases
    assert run.result.timed_out and run.deadline is not None
    assert run.deadline.seconds == launches.seen[-1][1] < FLAT_S
    hung = "passed its deadline; no stacks captured and the whole tree killed"
    assert f"{hung}\n    {run.deadline.describe()}" in outcome.report()


def test_a_group_gets_the_formation_ceiling_to_form_not_its_launchs_whole_ceiling(
    tmp_path: Path,
) -> None:
    """Worker processes start after the group formed: a ceiling raised for them (explore's
    WORKER_PROCESS_FACTOR) does not make a group that never forms wait longer. The report
    says which deadline the launch ran out of."""
    launches = Launches(tmp_path)
    runner = ScenarioRunner(tmp_path / "runs", launcher=launches, deadline_s=3 * FLAT_S)
    runner.formation_ceiling_s = FLAT_S
    outcome = runner.run(SCENARIO)
    formation = launches.formations[-1]
    assert formation is not None and formation.ceiling_s == 3 * FLAT_S
    assert formation.to_form_s == FLAT_S
    [problem] = outcome.harness_problems
    assert f"its group never formed: {FLAT_S:.0f}s to form from the start" in problem.describe()
