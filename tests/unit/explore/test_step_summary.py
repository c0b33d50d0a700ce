"""The step summary ``explore`` appends under GitHub Actions."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.explore.findings import Finding, FindingLabel, Section
from zephon_chaos.explore.step_summary import ENV, append_step_summary
from zephon_chaos.explore.summary import ExploreResult, TierStats
from zephon_chaos.scenario import Launch, Scenario

VIOLATION = "refusal.accepted.no-resume.no-resume"
KNOWN = "known.string-key-zero-cid-restore"


def result(tmp_path: Path) -> ExploreResult:
    made = ExploreResult(tmp_path, 600.0, "both", 11, 3, None, shard="2/4", elapsed_s=590.0)
    made.tiers = {
        "inproc": TierStats("inproc", scenarios=120, seconds=300.0, new_scenarios=100),
        "torchrun": TierStats("torchrun", scenarios=9, seconds=270.0, refused=2),
    }
    scenario = Scenario(launches=(Launch(1, 1),))
    made.findings = [
        Finding(VIOLATION, "torchrun", scenario, "", 3.0, label=FindingLabel.REPRODUCIBLE),
        Finding(KNOWN, "inproc", scenario, "", 1.0, label=FindingLabel.REPRODUCIBLE),
    ]
    return made


def test_under_github_actions_the_summary_is_appended_to_the_named_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "step-summary.md"
    target.write_text("# an earlier step\n")
    monkeypatch.setenv(ENV, str(target))
    assert append_step_summary(result(tmp_path)) == target
    text = target.read_text()
    assert text.startswith("# an earlier step\n")  # appended, not overwritten
    assert "## zephon-chaos explore: both tier, seed 11, shard 2/4" in text
    assert "129 scenarios in " in text
    assert "| inproc | 120 | 100 | 0 | 24.0 |" in text
    assert "| torchrun | 9 | 0 | 2 | 2.0 |" in text
    for section, n in ((Section.VIOLATION, 1), (Section.KNOWN, 1), (Section.FLAKY, 0)):
        assert f"| {section.value} | {n} |" in text
    assert f"| `{VIOLATION}` | {Section.VIOLATION.value} | reproducible | torchrun |" in text


def test_outside_github_actions_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert append_step_summary(result(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []
