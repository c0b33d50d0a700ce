"""``explore --junitxml``: a test case per finding, failing exactly where ``explore`` fails."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from zephon_chaos.commands.explore import ExitStatus, exit_status
from zephon_chaos.explore.findings import Finding, FindingLabel
from zephon_chaos.explore.junit import CaseResult, case_result, write_junit
from zephon_chaos.explore.summary import ExploreResult
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import PipelineSpec

VIOLATION = "refusal.accepted.no-resume.no-resume"
FLAKY = "checkpoint.differs.same-size.boundary"
HARNESS = "harness.no-error-message.resized.boundary"
KNOWN = "known.string-key-zero-cid-restore"
LABELS = {
    VIOLATION: FindingLabel.REPRODUCIBLE,
    FLAKY: FindingLabel.FLAKY,
    HARNESS: FindingLabel.HARNESS,
    KNOWN: FindingLabel.REPRODUCIBLE,
}


def finding(sig: str) -> Finding:
    scenario = Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(Launch(1, 1),))
    made = Finding(sig, "inproc", scenario, f"evidence of {sig}", 1.0, label=LABELS[sig])
    if made.label is FindingLabel.FLAKY:
        made.reruns = ["passed", sig]
    return made


def explored(tmp_path: Path, *sigs: str) -> ExploreResult:
    result = ExploreResult(tmp_path, 60.0, "inproc", 7, 2, None, elapsed_s=58.5)
    result.findings = [finding(s) for s in sigs]
    return result


def read(path: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return suite, {c.get("name", ""): c for c in suite.iter("testcase")}


def test_each_finding_is_a_case_that_says_what_it_did_to_the_exit_status(tmp_path: Path) -> None:
    result = explored(tmp_path, VIOLATION, FLAKY, HARNESS, KNOWN)
    suite, cases = read(write_junit(result, tmp_path / "out" / "explore.xml"))
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped", "time")}
    assert counts == dict(tests="4", failures="1", errors="1", skipped="2", time="58.500")
    assert set(cases) == {VIOLATION, FLAKY, HARNESS, KNOWN}
    failure = cases[VIOLATION].find("failure")
    assert failure is not None and failure.get("type") == "refusal"
    assert f"evidence of {VIOLATION}" in (failure.text or "")
    error = cases[HARNESS].find("error")
    assert error is not None and error.get("type") == "harness"
    known = cases[KNOWN].find("skipped")
    assert known is not None and "strict xfail" in known.get("message", "")
    flaky = cases[FLAKY].find("skipped")
    assert flaky is not None and f"passed, {FLAKY}" in flaky.get("message", "")
    assert cases[VIOLATION].get("classname") == "zephon_chaos.explore.inproc"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["seed"] == "7" and props["tier"] == "inproc"


def test_fail_on_flaky_makes_a_flaky_case_fail(tmp_path: Path) -> None:
    suite, cases = read(
        write_junit(explored(tmp_path, FLAKY), tmp_path / "j.xml", fail_on_flaky=True)
    )
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "0")
    assert cases[FLAKY].find("failure") is not None


def test_a_run_without_findings_is_an_empty_suite(tmp_path: Path) -> None:
    suite, cases = read(write_junit(explored(tmp_path), tmp_path / "j.xml"))
    assert cases == {} and suite.get("tests") == "0"


@pytest.mark.parametrize("fail_on_flaky", [False, True])
@pytest.mark.parametrize("sig", [VIOLATION, FLAKY, HARNESS, KNOWN])
def test_a_case_fails_or_errs_exactly_when_its_finding_fails_explore(
    tmp_path: Path, sig: str, fail_on_flaky: bool
) -> None:
    result = explored(tmp_path, sig)
    red = case_result(result.findings[0], fail_on_flaky) in (CaseResult.FAILURE, CaseResult.ERROR)
    assert red == (exit_status(result, fail_on_flaky) is not ExitStatus.CLEAN)
