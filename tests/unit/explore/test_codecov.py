"""Zephon's code reached by an in-process scenario is measured and reported."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.explore.codecov import (
    MEASURE_EVERY,
    NotMeasured,
    ZephonCoverage,
    write_files,
)
from zephon_chaos.explore.summary import Coverage
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

needs_no_tracer = pytest.mark.skipif(
    sys.gettrace() is not None, reason="a tracer (debugger or coverage run) is active already"
)


@pytest.fixture
def code() -> Iterator[ZephonCoverage]:
    measuring = ZephonCoverage()
    yield measuring
    measuring.disarm()


@needs_no_tracer
def test_a_small_in_process_run_reports_lines_branches_and_unreached_functions(
    tmp_path: Path, code: ZephonCoverage
) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(2, 2, (CheckpointAt(1),)),),
    )
    code.arm()
    assert code.running  # the first scenario of an armed round is measured
    with inproc_runner(tmp_path / "runs") as runner:
        assert runner.run(scenario).ok
        code.saw_scenario()
        assert not code.running  # the next MEASURE_EVERY - 1 are not
        assert MEASURE_EVERY > 1
    code.disarm()
    reach = code.reach()
    assert reach is not None and reach.scenarios == 1
    by_name = {m.module: m for m in reach.modules}
    coordination = by_name["zephon/_internal/coordination.py"]
    assert 0 < coordination.lines_hit < coordination.lines
    assert 0 < coordination.branches_hit <= coordination.branches
    assert coordination.never  # e.g. the file coordinator: this scenario aggregates via store
    json_path, csv_path = write_files(reach, tmp_path / "report")
    assert json.loads(json_path.read_text())["scenarios"] == 1
    rows = list(csv.DictReader(csv_path.open()))
    assert {r["module"] for r in rows} == set(by_name)


def test_another_active_tracer_is_left_alone(code: ZephonCoverage) -> None:
    previous = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        assert code.start() is False
    finally:
        sys.settrace(previous)
    assert code.skipped is NotMeasured.TRACER_ACTIVE
    assert code.reach() is None


def test_without_coverage_py_nothing_is_measured_and_the_summary_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "coverage", None)  # `import coverage` fails, as uninstalled
    code = ZephonCoverage()
    code.arm()
    assert code.start() is False
    assert code.skipped is NotMeasured.NO_COVERAGE
    code.saw_scenario()
    assert code.reach() is None
    lines = Coverage(code=code).section(tmp_path, max_world=2)
    assert f"Not measured: {NotMeasured.NO_COVERAGE.value}." in lines
    assert "pip install 'zephon-chaos[explore]'" in NotMeasured.NO_COVERAGE.value
