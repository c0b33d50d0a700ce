"""``zephon-chaos explore``'s CI outputs: ``--junitxml`` and the GitHub step summary."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from zephon_chaos import cli
from zephon_chaos.explore import search
from zephon_chaos.explore.findings import Finding, FindingLabel
from zephon_chaos.explore.report import ExploreResult
from zephon_chaos.explore.search import ExploreConfig
from zephon_chaos.explore.step_summary import ENV
from zephon_chaos.scenario import Phase, Scenario

VIOLATION = "refusal.accepted.no-resume.no-resume"


@pytest.fixture
def explored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExploreResult:
    """``explore`` returns this result without running anything."""
    result = ExploreResult(tmp_path / "r", 10.0, "inproc", 1, 2, None)
    scenario = Scenario(phases=(Phase(1, 1),))
    result.findings = [
        Finding(VIOLATION, "inproc", scenario, "", 1.0, label=FindingLabel.REPRODUCIBLE)
    ]

    class FakeExplorer:
        def __init__(self, config: ExploreConfig) -> None:
            pass

        def run(self) -> ExploreResult:
            return result

    monkeypatch.setattr(search, "Explorer", FakeExplorer)
    return result


def test_explore_writes_junit_xml_and_appends_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, explored: ExploreResult
) -> None:
    step_summary = tmp_path / "step-summary.md"
    monkeypatch.setenv(ENV, str(step_summary))
    junit = tmp_path / "ci" / "explore.xml"
    argv = ["explore", "--budget", "10s", "--report", str(tmp_path / "r"), "--junitxml", str(junit)]
    assert cli.main(argv) == 1
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("1", "1")
    assert "## zephon-chaos explore: inproc tier" in step_summary.read_text()


def test_a_junitxml_path_under_a_file_is_refused_before_exploring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], explored: ExploreResult
) -> None:
    (tmp_path / "file").write_text("")
    argv = ["explore", "--report", str(tmp_path / "r"), "--junitxml", str(tmp_path / "file/x.xml")]
    assert cli.main(argv) == 2
    assert "--junitxml" in capsys.readouterr().err
