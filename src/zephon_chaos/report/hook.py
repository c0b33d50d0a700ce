"""What the plugin's ``pytest_runtest_makereport`` adds to a test's reports.

A failing phase gets the failure sections (scenarios, groups, timeline) once, and the
artifact folder under ``--chaos-artifacts``; the teardown report of every test (passing or
not) carries the key facts as JUnit properties, so CI can count port retries and hangs.
"""

from __future__ import annotations

from typing import Any

from zephon_chaos.report.sections import group_reports

OUTCOMES_KEY = "_zephon_chaos_outcomes"
_SHOWN_KEY = "_zephon_chaos_sections_shown"


def scenario_outcomes(item: Any) -> list[Any]:
    return list(item.__dict__.get(OUTCOMES_KEY, []))


def finished_groups(item: Any) -> list[Any]:
    """Results attached to the test, plus those of groups it started with
    ``torchrun_group.spawn`` and waited for itself (attached only at teardown otherwise)."""
    results = group_reports(item)
    for value in getattr(item, "funcargs", {}).values():
        groups = getattr(value, "groups", None)  # a GroupFactory (``torchrun_group``)
        if not isinstance(groups, list):
            continue
        for group in groups:
            result = group.result
            if result is not None and result not in results:
                results.append(result)
    return results


def add_report_details(item: Any, report: Any) -> None:
    results = finished_groups(item)
    outcomes = scenario_outcomes(item)
    if report.failed and (results or outcomes) and not item.__dict__.get(_SHOWN_KEY):
        from zephon_chaos.report.failure import failure_sections

        report.sections.extend(failure_sections(results, outcomes))
        item.__dict__[_SHOWN_KEY] = True
    if report.failed:
        target = item.config.getoption("--chaos-artifacts", default=None)
        if target:
            from zephon_chaos.report.artifacts import write_artifacts

            path = write_artifacts(target, item.nodeid, report, results, outcomes)
            report.sections.append(("zephon-chaos artifacts", str(path)))
    if report.when == "teardown":
        from zephon_chaos.report.properties import group_properties, outcome_properties

        for result in results:
            report.user_properties.extend(group_properties(result))
        for outcome in outcomes:
            report.user_properties.extend(outcome_properties(outcome))
