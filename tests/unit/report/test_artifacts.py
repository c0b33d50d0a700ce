"""Artifacts and key facts of a failing test: files a person (and CI) can act on."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.report.artifacts import write_artifacts
from zephon_chaos.report.properties import group_properties, outcome_properties


def _outcome(tmp_path: Path) -> SimpleNamespace:
    scenario_file = tmp_path / "scenario.json"
    scenario_file.write_text("{}")
    return SimpleNamespace(
        scenario=SimpleNamespace(name="shrink-4-2"),
        ok=False,
        problems=[Problem(Area.LAUNCH, ProblemKind.FAILED, "phase 1 failed", phase=1)],
        verdict=None,
        reference=None,
        phases=[],
        scenario_file=scenario_file,
        report=lambda: f"shrink-4-2: ...\nreplay: zephon-chaos replay {scenario_file}",
    )


def test_key_facts_name_the_failure_the_port_retries_and_the_stuck_frame(
    failed_group: GroupResult,
) -> None:
    facts = dict(group_properties(failed_group))
    assert facts["group.g0.state"] == "failed"
    assert facts["group.g0.port_retries"] == "1"
    assert facts["group.g0.first_failure"].startswith("rank 1: killed by SIGKILL")
    assert facts["group.g0.unexplained_sigkill_ranks"] == "1"
    assert facts["group.g0.stuck.rank0"].startswith("train_step (work/train.py:42)")


def test_artifacts_hold_report_summary_timeline_facts_stacks_logs_and_replay(
    failed_group: GroupResult, tmp_path: Path
) -> None:
    outcome = _outcome(tmp_path)
    report = SimpleNamespace(when="call", longrepr="AssertionError: boom")
    target = write_artifacts(
        tmp_path / "art", "tests/x.py::test_y[a]", report, [failed_group], [outcome]
    )
    assert target.name == "tests_x.py_test_y_a"
    text = (target / "report.txt").read_text()
    assert "AssertionError: boom" in text and "zephon-chaos group g0" in text
    assert "zephon-chaos timeline" in text
    assert "Killed process 4343" in (target / "summary.txt").read_text()
    assert "started (pid 4242)" in (target / "timeline.txt").read_text()
    facts = json.loads((target / "properties.json").read_text())
    assert facts["scenario.shrink-4-2.verdict"] == "violation"
    assert "train_step" in (target / "g0" / "stacks" / "rank_0_pid_4242.txt").read_text()
    assert (target / "g0" / "logs" / "agent0" / "run" / "attempt_0" / "1" / "error.json").exists()
    assert (target / "g0" / "agent0-attempt1.log").exists()
    assert (target / "shrink-4-2.json").exists()
    assert (target / "replay.txt").read_text().startswith("zephon-chaos replay ")
    assert dict(outcome_properties(outcome))["scenario.shrink-4-2.replay"].startswith(
        "zephon-chaos replay"
    )
