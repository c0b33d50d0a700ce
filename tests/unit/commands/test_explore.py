"""``zephon-chaos explore``'s CI outputs (``--junitxml``, the GitHub step summary) and its
``--jobs``: the flags, the children's options, a real run in two local shards."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from zephon_chaos import cli
from zephon_chaos.commands.explore import JOBS_OWN, ExitStatus, child_options, jobs_of
from zephon_chaos.explore import search
from zephon_chaos.explore.findings import Finding, FindingLabel
from zephon_chaos.explore.search import ExploreConfig
from zephon_chaos.explore.step_summary import ENV
from zephon_chaos.explore.summary import ExploreResult
from zephon_chaos.explore.summary_json import read_summary_json
from zephon_chaos.procs import pids_with_env
from zephon_chaos.scenario import Launch, Scenario

VIOLATION = "refusal.accepted.no-resume.no-resume"


@pytest.fixture
def explored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExploreResult:
    """``explore`` returns this result without running anything."""
    result = ExploreResult(tmp_path / "r", 10.0, "inproc", 1, 2, None)
    scenario = Scenario(launches=(Launch(1, 1),))
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
    assert cli.main([*argv, "--jobs", "1"]) == 1  # in process: the fake explorer
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


# ---- --jobs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "0"], "--jobs 0: must be at least 1"),
        (["--jobs", "-2"], "--jobs -2: must be at least 1"),
        (["--jobs", "2", "--shard", "1/4"], "--jobs 2 with --shard 1/4: a shard of a split run"),
    ],
    ids=["zero", "negative", "with-a-shard"],
)
def test_bad_jobs_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert cli.main(["explore", *argv, "--budget", "5", "--report", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("jobs", "shard", "cores", "expected"),
    [(None, None, 4, 4), (None, "2/4", 4, 1), (1, "2/4", 4, 1), (3, None, 2, 3), (1, None, 8, 1)],
)
def test_jobs_default_to_the_cores_and_to_one_under_a_shard(
    jobs: int | None, shard: str | None, cores: int, expected: int
) -> None:
    assert jobs_of(jobs, shard, cores) == expected


def test_jobs_above_the_cores_are_allowed_and_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from zephon_chaos.explore import jobs

    ran: list[int] = []

    def no_children(argvs: list[tuple[object, list[str]]], *_: object) -> jobs.JobsRun:
        ran.append(len(argvs))
        return jobs.JobsRun([], interrupted=False, elapsed_s=0.0)

    monkeypatch.setattr(jobs, "usable_cores", lambda: 2)
    monkeypatch.setattr(jobs, "run_jobs", no_children)
    code = cli.main(["explore", "--jobs", "3", "--budget", "5", "--report", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert ran == [3]
    assert "--jobs 3 is more than the 2 CPU(s)" in err
    assert code == ExitStatus.HARNESS and "no shard wrote a report" in err


def test_a_child_gets_every_flag_of_the_parent_but_those_of_the_jobs() -> None:
    """Parsed again, a child's flags give the parent's options: a new option of explore
    reaches the children without a word here."""
    parser = cli.build_parser()
    argv = [
        "explore", "--budget", "90s", "--tier", "both", "--max-world", "3", "--max-phases", "2",
        "--deadline", "45.5", "--launch", "cli", "--store-faults", "--no-aim", "--profile",
        "downstream", "--plant", "skip_sample", "--fail-on-flaky", "--jobs", "2", "--report",
        "somewhere", "--junitxml", "x.xml", "--database", "db",
    ]
    args = parser.parse_args(argv)
    child = parser.parse_args(["explore", *child_options(args, seed=77)])
    own = {"jobs", "shard", "report", "database", "junitxml", "seed"}
    for name, value in vars(args).items():
        if name not in own:
            assert getattr(child, name) == value, name
    assert (child.seed, child.jobs, child.junitxml, child.database) == (77, None, None, None)
    assert {f"--{name}" for name in own} == set(JOBS_OWN)


@pytest.mark.slow  # 25-45 s here: a 20 s budget, two start-ups, the merge
def test_two_local_shards_explore_and_merge_into_one_report(tmp_path: Path) -> None:
    """A real ``--jobs 2`` run: both shards' reports merged into the report folder, their
    scenarios summed, the exit status the merged one's, and nothing left running."""
    report = tmp_path / "r"
    mark = uuid.uuid4().hex
    env = {**os.environ, "ZC_TEST_JOBS_MARK": mark}
    env.pop(ENV, None)
    argv = [sys.executable, "-m", "zephon_chaos.cli", "explore", "--jobs", "2", "--budget", "20s"]
    argv += ["--tier", "inproc", "--seed", "5", "--report", str(report)]
    argv += ["--junitxml", str(report / "explore.xml")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20 + 150)
    assert pids_with_env("ZC_TEST_JOBS_MARK", mark) == []
    assert done.returncode in (ExitStatus.CLEAN, ExitStatus.VIOLATION), done.stderr
    merged = read_summary_json(report / "summary.json")
    shards = [read_summary_json(report / "shards" / i / "summary.json") for i in ("1", "2")]
    assert [s.shard for s in shards] == ["1/2", "2/2"]
    assert [r.shard for r in merged.runs] == ["1/2", "2/2"]
    scenarios = [s.tiers["inproc"].scenarios for s in shards]
    assert all(scenarios), scenarios
    assert merged.tiers["inproc"].scenarios == sum(scenarios)
    assert f"{sum(scenarios)} scenarios" in done.stdout
    assert "2 runs merged" in (report / "summary.md").read_text()
    for f in merged.findings:
        assert f.scenario_file is not None and (report / f.scenario_file).is_file()
    suite = ET.parse(report / "explore.xml").getroot()
    assert suite.get("tests") == str(len(merged.findings))
    for i in ("1", "2"):
        assert "[shard " + i + "/2] exploring for 20s" in done.stderr
        assert "exploring for 20s" in (report / "shards" / i / "stderr.log").read_text()
    assert (report / "example-db").is_dir()
