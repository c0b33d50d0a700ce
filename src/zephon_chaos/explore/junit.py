"""An exploration's findings as JUnit XML (``explore --junitxml PATH``), for CI test views.

One test case per finding signature. What a case reports follows what the finding does to
``explore``'s exit status (:func:`case_result`): a violation is a failure, a harness problem
an error (exit 3: the harness's bug, never Zephon's), a known defect of Zephon is skipped, as
pytest reports the strict xfail that pins it, and a flaky finding is skipped unless
``--fail-on-flaky`` makes it fail. A run without findings is a suite of no cases.

Made from the typed values of :class:`~zephon_chaos.explore.summary.ExploreResult`, with the
standard library's ``xml.etree.ElementTree``; nothing is read back from ``summary.md``.
"""

from __future__ import annotations

import enum
import xml.etree.ElementTree as ET
from pathlib import Path

from zephon_chaos.explore.findings import Finding, Section
from zephon_chaos.explore.summary import ExploreResult
from zephon_chaos.explore.tiers import replay_command

SUITE = "zephon-chaos explore"


class CaseResult(enum.Enum):
    """A test case's outcome; the value is the JUnit element that says it (none: passed)."""

    PASSED = ""
    FAILURE = "failure"
    ERROR = "error"
    SKIPPED = "skipped"


SECTION_RESULT: dict[Section, CaseResult] = {
    Section.VIOLATION: CaseResult.FAILURE,
    Section.FLAKY: CaseResult.SKIPPED,
    Section.HARNESS: CaseResult.ERROR,
    Section.KNOWN: CaseResult.SKIPPED,
}
"""Each section's case, as it counts in ``explore``'s exit status (``--fail-on-flaky``
aside); a new section (a limitation kind, say) takes its place here."""


def case_result(finding: Finding, fail_on_flaky: bool = False) -> CaseResult:
    if fail_on_flaky and finding.section is Section.FLAKY:
        return CaseResult.FAILURE
    return SECTION_RESULT[finding.section]


def _message(finding: Finding) -> str:
    if finding.section is Section.KNOWN:
        return f"a known defect of Zephon, pinned by a strict xfail ({finding.label})"
    if finding.section is Section.FLAKY:
        return f"flaky: confirmation reruns {', '.join(finding.reruns) or 'none'}"
    return f"{finding.label}: {finding.scenario.summary()}"


def _properties(parent: ET.Element, values: dict[str, object]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in values.items():
        if value is not None:
            ET.SubElement(props, "property", name=name, value=str(value))


def _within(path: Path, folder: Path) -> Path:
    return path.relative_to(folder) if path.is_relative_to(folder) else path


def _case(suite: ET.Element, result: ExploreResult, finding: Finding, fail: bool) -> CaseResult:
    case = ET.SubElement(
        suite, "testcase", classname=f"zephon_chaos.explore.{finding.tier}", name=finding.signature
    )
    scenario = next((p for p in finding.files if p.suffix == ".json"), None)
    _properties(
        case,
        {
            "section": finding.section.value,
            "label": finding.label.value,
            "seen": finding.seen,
            "scenario": None if scenario is None else _within(scenario, result.report_dir),
            "replay": None if scenario is None else replay_command(scenario, finding.tier),
        },
    )
    outcome = case_result(finding, fail)
    text = finding.describe(scenario)
    if outcome is CaseResult.PASSED:
        return outcome
    element = ET.SubElement(case, outcome.value, message=_message(finding))
    if outcome is CaseResult.SKIPPED:
        ET.SubElement(case, "system-out").text = text
    else:
        element.set("type", finding.signature.split(".", 1)[0])
        element.text = text
    return outcome


def junit_tree(result: ExploreResult, fail_on_flaky: bool = False) -> ET.ElementTree:
    """``<testsuites>`` holding one ``<testsuite>`` of the run's findings."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=SUITE)
    _properties(
        suite,
        {
            "tier": result.tier,
            "seed": result.seed,
            "shard": result.shard,
            "budget_s": f"{result.budget_s:.0f}",
            "scenarios": result.scenarios,
            "interrupted": "true" if result.interrupted else None,
        },
    )
    outcomes = [_case(suite, result, f, fail_on_flaky) for f in result.findings]
    counts = {
        "tests": len(outcomes),
        "failures": outcomes.count(CaseResult.FAILURE),
        "errors": outcomes.count(CaseResult.ERROR),
        "skipped": outcomes.count(CaseResult.SKIPPED),
    }
    for element in (root, suite):
        for name, n in counts.items():
            element.set(name, str(n))
        element.set("time", f"{result.elapsed_s:.3f}")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(result: ExploreResult, path: Path, fail_on_flaky: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_tree(result, fail_on_flaky).write(path, encoding="utf-8", xml_declaration=True)
    return path
