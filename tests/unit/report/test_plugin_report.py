"""The plugin's report hook in a real session: sections, artifacts, JUnit key facts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

INNER = r"""
import pytest
from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.report.sections import attach_group_report


def _result(tmp_path, name, ok):
    rank = RankOutcome(0, 0, 0, 4242, 0 if ok else 3, error=None if ok else "ValueError: bad")
    return GroupResult(name, [0 if ok else 1], [rank], False, 1.0, tmp_path, [],
                       first_failure=None if ok else rank, attempts=1 if ok else 3)


def test_passes(request, tmp_path):
    attach_group_report(request.node, _result(tmp_path, "good", True))


def test_fails(request, tmp_path):
    attach_group_report(request.node, _result(tmp_path, "bad", False))
    assert False, "the oracle says no"


class _Factory:  # what torchrun_group looks like to the report: groups that were waited for
    def __init__(self, result):
        self.groups = [type("Group", (), {"result": result})()]


@pytest.fixture
def spawned(tmp_path):
    return _Factory(_result(tmp_path, "spawned", False))


def test_fails_after_waiting_itself(spawned):
    assert False, "checked the result of a group it waited for itself"
"""


def test_failing_tests_get_sections_and_artifacts_and_every_test_gets_key_facts(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner=INNER)
    art = pytester.path / "art"
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--chaos-artifacts={art}", f"--junitxml={junit}", timeout=120
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*zephon-chaos group bad*", "*rank 0 (pid 4242): exited 3*"])
    folder = art / "test_inner.py_test_fails"
    assert "the oracle says no" in (folder / "report.txt").read_text()
    assert not (art / "test_inner.py_test_passes").exists()

    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    assert props["test_passes"]["group.good.state"] == "ok"
    assert props["test_passes"]["group.good.port_retries"] == "0"
    assert props["test_fails"]["group.bad.state"] == "failed"
    assert props["test_fails"]["group.bad.port_retries"] == "2"
    assert props["test_fails"]["group.bad.first_failure"] == "rank 0: exited 3: ValueError: bad"
    assert props["test_fails_after_waiting_itself"]["group.spawned.state"] == "failed"
    spawned = (art / "test_inner.py_test_fails_after_waiting_itself" / "summary.txt").read_text()
    assert "group 'spawned': failed" in spawned
