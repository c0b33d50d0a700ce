"""What a finding is labelled, where it is reported, and what it makes explore's exit status:
a violation reproduces; a flaky finding and a failure the harness cannot describe are not
violations."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from zephon_chaos import cli
from zephon_chaos.commands.explore import ExitStatus, exit_status
from zephon_chaos.explore import picture, search
from zephon_chaos.explore.findings import (
    Finding,
    FindingLabel,
    Section,
    confirmation_order,
    launch_reports,
)
from zephon_chaos.explore.known import judged_ok
from zephon_chaos.explore.search import ExploreConfig, Explorer
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.summary import ExploreResult, write_summary
from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome, expected_failure_problems
from zephon_chaos.scenario import Found, Launch, Scenario
from zephon_chaos.workload.spec import PipelineSpec

ACCEPTED = "refusal.accepted.no-resume.no-resume"
EXPECTED_ERROR = "canonical_replicas (2) must be >= dp_degree (3)"


def scenario() -> Scenario:
    return Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(Launch(1, 1),))


def failing() -> ScenarioOutcome:
    accepted = Problem(
        Area.REFUSAL, ProblemKind.ACCEPTED, "phase 0 was expected to fail but succeeded"
    )
    return ScenarioOutcome(scenario(), None, problems=[accepted])


def passing() -> ScenarioOutcome:
    return ScenarioOutcome(scenario(), None)


def finding(sig: str = ACCEPTED, label: FindingLabel = FindingLabel.UNCONFIRMED) -> Finding:
    made = Finding(sig, "inproc", scenario(), "evidence", 1.0)
    if not made.harness:
        made.label = label
    return made


# ---- confirmation: reproducible, flaky, out of time ----------------------------------------


def test_findings_that_decide_the_exit_are_confirmed_before_known_defects() -> None:
    early_known = Finding("known.stalled-store-link", "inproc", scenario(), "evidence", 1.0)
    late_known = Finding("known.missed-round-poisons-next", "inproc", scenario(), "e", 9.0)
    new = Finding(ACCEPTED, "inproc", scenario(), "evidence", 279.0)
    newer = Finding("checkpoint.other.no-resume.no-resume", "inproc", scenario(), "e", 300.0)
    order = confirmation_order([late_known, newer, early_known, new])
    assert order == [new, newer, early_known, late_known]


def reruns(*outcomes: ScenarioOutcome | None) -> Callable[[Scenario], ScenarioOutcome | None]:
    left: Iterator[ScenarioOutcome | None] = iter(outcomes)
    return lambda _scenario: next(left)


@pytest.mark.parametrize(
    ("outcomes", "label", "section"),
    [
        ((failing(), failing()), FindingLabel.REPRODUCIBLE, Section.VIOLATION),
        ((passing(), passing()), FindingLabel.FLAKY, Section.FLAKY),
        ((failing(), passing()), FindingLabel.FLAKY, Section.FLAKY),
        ((failing(), None), FindingLabel.OUT_OF_TIME, Section.VIOLATION),
        ((passing(), None), FindingLabel.FLAKY, Section.FLAKY),
    ],
    ids=["reproducible", "reruns-pass", "one-rerun-passes", "out-of-time", "passed-then-time"],
)
def test_a_finding_is_a_violation_only_if_no_rerun_refutes_it(
    outcomes: tuple[ScenarioOutcome | None, ...], label: FindingLabel, section: Section
) -> None:
    found = finding()
    assert found.confirm(reruns(*outcomes), times=2) is label
    assert found.label is label and found.section is section
    assert f"({label.value}, inproc tier)" in found.describe()
    if label is FindingLabel.FLAKY:
        assert "confirmation reruns: " in found.describe() and "passed" in found.reruns


def test_harness_and_known_findings_are_reported_apart() -> None:
    assert finding("harness.RuntimeError.no-resume.no-resume").label is FindingLabel.HARNESS
    assert finding("harness.no-error-message.resized.boundary").section is Section.HARNESS
    known = finding("known.some-defect", FindingLabel.FLAKY)
    assert known.section is Section.KNOWN


# ---- a failure the harness cannot describe ---------------------------------------------------


def refused_launch(first: RankOutcome | None, ranks: list[RankOutcome]) -> GroupResult:
    return GroupResult("g", [1], ranks, False, 1.0, Path("."), [], first_failure=first)


def rank(exitcode: int | None, error: str | None = None, **kw: object) -> RankOutcome:
    return RankOutcome(1, 1, 0, 4242, exitcode, error=error, **kw)  # type: ignore[arg-type]


REFUSED = Launch(3, 2, expect_failure=True, expect_error=EXPECTED_ERROR)


@pytest.mark.parametrize(
    ("first", "gap"),
    [
        (rank(1), HarnessGap.NO_ERROR_MESSAGE),
        (None, HarnessGap.UNKNOWN_EXIT_STATUS),
        (rank(-signal.SIGKILL, killed_by_harness=True), HarnessGap.UNKNOWN_EXIT_STATUS),
    ],
    ids=["exited-without-message", "agent-silent", "torn-down-by-the-harness"],
)
def test_a_refusal_the_harness_cannot_describe_is_its_own_problem(
    first: RankOutcome | None, gap: HarnessGap
) -> None:
    silent = rank(None, unknown_because="its agent ended (exited 1) without reporting it")
    result = refused_launch(first, [first or silent])
    problems, undescribed = expected_failure_problems(1, REFUSED, result)
    assert problems == [] and [h.gap for h in undescribed] == [gap]
    outcome = ScenarioOutcome(scenario(), None, harness_problems=undescribed)
    assert not outcome.ok and not judged_ok(outcome)
    assert signature(outcome) == f"harness.{gap.value}.no-resume.no-resume"
    assert f"harness problem ({gap.value}): phase 1" in outcome.report()


@pytest.mark.parametrize(
    ("first", "said"),
    [
        (rank(1, "ValueError: something else"), "rank 1: ValueError: something else"),
        (rank(-signal.SIGSEGV), "rank 1: killed by SIGSEGV"),
    ],
    ids=["another-error", "killed-by-a-signal"],
)
def test_a_refusal_with_a_described_wrong_failure_stays_a_finding(
    first: RankOutcome, said: str
) -> None:
    problems, undescribed = expected_failure_problems(1, REFUSED, refused_launch(first, [first]))
    assert undescribed == [] and len(problems) == 1 and said in problems[0].text
    assert signature(ScenarioOutcome(scenario(), None, problems=problems)) == (
        "refusal.wrong-error.no-resume.no-resume"
    )


def test_a_violation_names_a_scenario_with_a_harness_problem_too() -> None:
    _, undescribed = expected_failure_problems(1, REFUSED, refused_launch(rank(1), [rank(1)]))
    both = ScenarioOutcome(scenario(), None, problems=failing().problems)
    both.harness_problems += undescribed
    assert signature(both) == ACCEPTED


# ---- the summary and the exit status ---------------------------------------------------------


def explored(tmp_path: Path, *found: Finding) -> ExploreResult:
    return ExploreResult(tmp_path, 60.0, "inproc", 1, 2, None, findings=list(found))


CASES = {
    "nothing": ((), False, ExitStatus.CLEAN),
    "known": ((("known.x", FindingLabel.REPRODUCIBLE),), False, ExitStatus.CLEAN),
    "flaky": (((ACCEPTED, FindingLabel.FLAKY),), False, ExitStatus.CLEAN),
    "flaky-flag": (((ACCEPTED, FindingLabel.FLAKY),), True, ExitStatus.VIOLATION),
    "harness": (
        (("harness.OSError.no-resume.no-resume", FindingLabel.HARNESS),),
        False,
        ExitStatus.HARNESS,
    ),
    "reproducible+harness": (
        ((ACCEPTED, FindingLabel.REPRODUCIBLE), ("harness.OSError.no-resume.no-resume", None)),
        False,
        ExitStatus.VIOLATION,
    ),
    "out-of-time": (((ACCEPTED, FindingLabel.OUT_OF_TIME),), False, ExitStatus.VIOLATION),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_exit_status_follows_the_sections(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    made, flag, status = CASES[case]
    result = explored(
        tmp_path, *(finding(sig, label or FindingLabel.UNCONFIRMED) for sig, label in made)
    )
    assert exit_status(result, fail_on_flaky=flag) is status

    class FakeExplorer:
        def __init__(self, config: ExploreConfig) -> None:
            pass

        def run(self) -> ExploreResult:
            return result

    monkeypatch.setattr(search, "Explorer", FakeExplorer)
    argv = ["explore", "--budget", "10s", "--report", str(tmp_path / "r"), "--jobs", "1"]
    assert cli.main(argv + (["--fail-on-flaky"] if flag else [])) == status
    out, err = capsys.readouterr()
    heads = {
        Section.FLAKY: "flaky (",
        Section.HARNESS: "harness problems (",
        Section.KNOWN: "known defects:",
        Section.VIOLATION: "violations:",
    }
    for section, head in heads.items():
        assert (head in out) == bool(result.in_section(section)), out
    assert ("no violation, but the harness failed" in err) == (status is ExitStatus.HARNESS)


def test_the_summary_lists_violations_flaky_findings_and_harness_problems_apart(
    tmp_path: Path,
) -> None:
    flaky = finding("checkpoint.differs.same-size.boundary")
    flaky.confirm(reruns(passing(), failing()), times=2)
    result = explored(
        tmp_path,
        finding(ACCEPTED, FindingLabel.REPRODUCIBLE),
        flaky,
        finding("harness.no-error-message.resized.boundary"),
    )
    text = write_summary(result).read_text()
    order = [
        text.index(h)
        for h in ("## Violations (1)", "## Flaky findings (1)", "## Harness problems (1)")
    ]
    assert order == sorted(order), text
    violations = text[order[0] : order[1]]
    flaky_part = text[order[1] : order[2]]
    assert ACCEPTED in violations and "checkpoint.differs" not in violations
    assert f"confirmation reruns: passed, {ACCEPTED}" in flaky_part
    assert "harness.no-error-message" in text[order[2] :]
    assert "## Known defects" not in text


def test_a_saved_finding_records_the_tier_lane_and_signature_it_was_found_with(
    tmp_path: Path,
) -> None:
    made = finding(ACCEPTED, FindingLabel.REPRODUCIBLE)
    json_path = next(p for p in made.save(tmp_path, "cli") if p.suffix == ".json")
    assert Scenario.load(json_path).found == Found("inproc", "cli", ACCEPTED)


STUCK = "Thread 9 (idle): \"MainThread\"\n    _create_c10d_store (distributed/rendezvous.py:190)"


def hung(ok: bool) -> SimpleNamespace:
    """An outcome with what ``launch_reports`` reads: a passing reference, a launch judged,
    then one whose group never formed (the runner keeps it apart: nothing of it is judged)."""

    def launch(name: str, ok: bool) -> SimpleNamespace:
        report = f"group {name!r}: passed its deadline\n--- stacks of rank 3 (pid 9) ---\n{STUCK}"
        return SimpleNamespace(name=name, ok=ok, report=lambda tail_lines: report)

    return SimpleNamespace(
        reference=SimpleNamespace(result=launch("s5-reference", True)),
        phases=[SimpleNamespace(result=launch("s5-phase0", True))],
        unformed=[launch("s5-phase1", ok)],
    )


def test_a_saved_finding_keeps_its_failed_launches_whole_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evidence keeps a process's innermost frame only; a hang is triaged on the rest:
    every stack, every rank's and agent's log tail."""
    monkeypatch.setattr(picture, "plot_timeline", lambda *a, **k: None)
    made = finding("harness.group-never-formed.no-resume.no-resume")
    made.outcome = hung(ok=False)  # type: ignore[assignment]
    saved = {p.name: p for p in made.save(tmp_path, "cli")}
    text = saved[f"{made.file_stem()}.launches.txt"].read_text()
    assert "=== launch s5-phase1 ===" in text and "s5-reference" not in text
    assert "s5-phase0" not in text
    assert f"--- stacks of rank 3 (pid 9) ---\n{STUCK}" in text
    assert launch_reports(hung(ok=True)) == ""  # type: ignore[arg-type]


# ---- the explorer end to end, with a fake runner ---------------------------------------------


class FakeRunner:
    """A ScenarioRunner stand-in: ``behave(n)`` says what its n-th run does."""

    def __init__(self, behave: Callable[[int], ScenarioOutcome]) -> None:
        self.behave = behave
        self.runs = 0
        self.deadline_s = 1.0
        self.deadline_cap: object = None
        self.reference_cache: dict[object, object] = {}

    def run(self, scenario: Scenario) -> ScenarioOutcome:
        self.runs += 1
        outcome = self.behave(self.runs)
        outcome.scenario = scenario
        return outcome


def explore_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behave: Callable[[int], ScenarioOutcome]
) -> ExploreResult:
    monkeypatch.setattr(search, "make_runner", lambda *_a, **_k: FakeRunner(behave))
    return Explorer(
        ExploreConfig(
            budget_s=60,
            report_dir=tmp_path / "report",
            tier="inproc",
            seed=1,
            max_world=2,
            max_phases=2,
            stop_when=lambda found: bool(found),
        )
    ).run()


def test_a_failure_its_reruns_do_not_reproduce_is_flaky_and_does_not_fail_explore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = explore_with(tmp_path, monkeypatch, lambda n: failing() if n == 1 else passing())
    [found] = result.findings
    assert found.signature == ACCEPTED and found.label is FindingLabel.FLAKY
    assert found.reruns == ["passed", "passed"]
    assert result.violations == [] and result.in_section(Section.FLAKY) == [found]
    assert exit_status(result) is ExitStatus.CLEAN
    assert exit_status(result, fail_on_flaky=True) is ExitStatus.VIOLATION
    assert "## Flaky findings (1)" in (tmp_path / "report" / "summary.md").read_text()


def test_a_scenario_the_harness_raised_on_is_a_harness_problem_not_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_n: int) -> ScenarioOutcome:
        raise RuntimeError("the harness broke")

    result = explore_with(tmp_path, monkeypatch, broken)
    [found] = result.findings
    assert found.signature == "harness.RuntimeError.no-resume.no-resume"
    assert found.label is FindingLabel.HARNESS and found.reruns == []
    assert result.violations == []
    assert exit_status(result) is ExitStatus.HARNESS
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "## Harness problems (1)" in summary and "the harness broke" in summary


def test_usage_stays_exit_2(tmp_path: Path) -> None:
    assert cli.main(["explore", "--budget", "soon", "--report", str(tmp_path)]) == 2
