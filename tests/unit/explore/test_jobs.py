"""``explore --jobs``'s machinery: the children's command lines, their deadlines and process
trees, and the shards' reports merged and read back as one result with one exit status."""

from __future__ import annotations

import io
import os
import sys
import uuid
from pathlib import Path

import pytest

from zephon_chaos.cli import build_parser
from zephon_chaos.commands.explore import ExitStatus, exit_status, jobs_of
from zephon_chaos.explore import jobs
from zephon_chaos.explore.database import LOCAL_COPY
from zephon_chaos.explore.findings import Finding, FindingLabel
from zephon_chaos.explore.merge import merge, write_merged
from zephon_chaos.explore.shard import Shard
from zephon_chaos.explore.summary import ExploreResult, TierStats
from zephon_chaos.explore.summary_json import write_summary_json
from zephon_chaos.procs import pids_with_env
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

# ---- the children's command lines ------------------------------------------------------


def test_a_child_explores_its_shard_into_its_folder_with_the_shared_database(
    tmp_path: Path,
) -> None:
    report = tmp_path / "r"
    database = jobs.shared_database(None, report)
    argv = jobs.child_argv(["--seed", "9", "--budget", "2m"], Shard(2, 3), report, database)
    assert argv[:4] == [sys.executable, "-m", "zephon_chaos.cli", "explore"]
    args = build_parser().parse_args(argv[3:])
    assert (args.seed, args.budget, args.shard) == (9, "2m", "2/3")
    assert Path(args.report) == report / "shards" / "2"
    assert args.database == str(report / LOCAL_COPY)
    assert jobs_of(args.jobs, args.shard, cores=8) == 1, "a child must not split again"


@pytest.mark.parametrize(
    ("spec", "passed", "joined"),
    [
        (None, "{report}/example-db", False),
        ("{report}/example-db", "{report}/example-db", False),
        ("{tmp}/db", "{tmp}/db", True),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", True),
        ("github-artifact:o/r", "github-artifact:o/r", True),
        ("none", "none", True),
    ],
    ids=["default", "the-report-one", "a-directory", "redis", "github-artifact", "none"],
)
def test_the_shards_share_the_users_database_else_the_reports(
    tmp_path: Path, spec: str | None, passed: str, joined: bool
) -> None:
    """Only the report's own directory, which every shard wrote to, is not joined (the merge
    would replace it with the shards' folders, which hold nothing)."""
    report = tmp_path / "r"
    names = {"report": str(report), "tmp": str(tmp_path)}
    given = None if spec is None else spec.format(**names)
    shared = jobs.shared_database(given, report)
    assert shared == passed.format(**names)
    assert jobs.joins_databases(shared, report) is joined


# ---- deadlines and process trees -------------------------------------------------------

CHILD = """
import signal, subprocess, sys, time
{on_sigint}
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print("started a grandchild in a session of its own", file=sys.stderr, flush=True)
time.sleep(600)
"""
IGNORES_SIGINT = "signal.signal(signal.SIGINT, signal.SIG_IGN)"
OBEYS_SIGINT = "signal.signal(signal.SIGINT, lambda *_: sys.exit(130))"


def test_children_past_their_deadline_are_interrupted_then_killed_with_their_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 1 ignores SIGINT (killed after the grace), shard 2 stops on it; each leaves a
    grandchild in a session of its own, as torchrun's workers are: none survives."""
    monkeypatch.setattr(jobs, "OVERRUN_S", 3.0)
    monkeypatch.setattr(jobs, "INTERRUPT_GRACE_S", 0.5)
    mark = uuid.uuid4().hex
    monkeypatch.setenv("ZC_TEST_JOBS_MARK", mark)
    argvs = [
        (Shard(i, 2), [sys.executable, "-c", CHILD.format(on_sigint=handler)])
        for i, handler in ((1, IGNORES_SIGINT), (2, OBEYS_SIGINT))
    ]
    stream = io.StringIO()
    done = jobs.run_jobs(argvs, tmp_path, budget_s=0.0, stream=stream)
    assert pids_with_env("ZC_TEST_JOBS_MARK", mark) == []
    one, two = done.runs
    assert not done.interrupted
    assert one.problem is not None and "passed its deadline" in one.problem
    assert "ignored SIGINT: killed" in one.problem
    assert two.problem is not None and "killed" not in two.problem and two.exit_code == 130
    for run in done.runs:
        assert run.leftovers >= 1, run  # the grandchild
        assert "grandchild" in (run.folder / jobs.STDERR_LOG).read_text()
        assert f"[shard {run.shard}] started a grandchild" in stream.getvalue()
    assert done.failed == done.runs  # no report from either


# ---- the merged report, one result, one exit status --------------------------------------

VIOLATION = "batches-identical.reordered.same-size.boundary"
KNOWN = "known.string-key-zero-cid-restore"
LIMITATION = "limitation.some-documented-limit"
HARNESS = "harness.no-error-message.resized.boundary"
REPRODUCIBLE, FLAKY = FindingLabel.REPRODUCIBLE, FindingLabel.FLAKY


def _scenario(launches: int) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=tuple(
            Launch(1, 1, (CheckpointAt(0, 1),) if i < launches - 1 else ()) for i in range(launches)
        ),
    )


def _shard(
    report: Path,
    shard: Shard,
    found: list[tuple[str, FindingLabel]],
    interrupted: bool = False,
) -> jobs.ShardRun:
    """A child's report as a child writes it (``Finding.save``, ``write_summary_json``)."""
    folder = jobs.shard_folder(report, shard)
    result = ExploreResult(
        folder,
        60.0,
        "inproc",
        7,
        2,
        None,
        shard=str(shard),
        elapsed_s=50.0,
        interrupted=interrupted,
    )
    result.tiers = {"inproc": TierStats("inproc", scenarios=10 * shard.index, seconds=50.0)}
    for sig, label in found:
        f = Finding(sig, "inproc", _scenario(shard.index), f"evidence of {sig}", 3.0, label=label)
        f.save(folder / "findings")
        result.findings.append(f)
    write_summary_json(result)
    return jobs.ShardRun(shard, folder, exit_code=130 if interrupted else 0)


CASES: dict[
    str,
    tuple[list[tuple[str, FindingLabel]], list[tuple[str, FindingLabel]] | None, bool, ExitStatus],
] = {
    # shard 1's findings, shard 2's (None: no report), --fail-on-flaky, the status
    "nothing": ([], [], False, ExitStatus.CLEAN),
    "known-and-limitation": (
        [(KNOWN, REPRODUCIBLE)],
        [(LIMITATION, REPRODUCIBLE)],
        False,
        ExitStatus.CLEAN,
    ),
    "a-violation-in-one-shard": (
        [(KNOWN, REPRODUCIBLE)],
        [(VIOLATION, REPRODUCIBLE)],
        False,
        ExitStatus.VIOLATION,
    ),
    "flaky": ([(VIOLATION, FLAKY)], [], False, ExitStatus.CLEAN),
    "flaky-failing": ([(VIOLATION, FLAKY)], [], True, ExitStatus.VIOLATION),
    "reproduced-somewhere-beats-flaky": (
        [(VIOLATION, FLAKY)],
        [(VIOLATION, REPRODUCIBLE)],
        False,
        ExitStatus.VIOLATION,
    ),
    "harness": ([(HARNESS, REPRODUCIBLE)], [], False, ExitStatus.HARNESS),
    "a-shard-without-report": ([(KNOWN, REPRODUCIBLE)], None, False, ExitStatus.HARNESS),
    "a-violation-outranks-a-lost-shard": (
        [(VIOLATION, REPRODUCIBLE)],
        None,
        False,
        ExitStatus.VIOLATION,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_merged_shards_exit_as_one_run_with_their_findings_would(
    tmp_path: Path, case: str
) -> None:
    first, second, fail_on_flaky, status = CASES[case]
    report = tmp_path / "r"
    runs = [_shard(report, Shard(1, 2), first)]
    if second is None:
        runs.append(jobs.ShardRun(Shard(2, 2), jobs.shard_folder(report, Shard(2, 2)), 1, "died"))
    else:
        runs.append(_shard(report, Shard(2, 2), second))
    done = jobs.JobsRun(runs, interrupted=False, elapsed_s=61.0)
    reports, unread = jobs.read_shards(runs)
    assert (Shard(2, 2) in unread) is (second is None)
    merged = merge(reports)
    write_merged(merged, report, join_databases=False)
    result = jobs.merged_result(merged, report, budget_s=60.0, elapsed_s=61.0, max_world=2)
    got = exit_status(result, fail_on_flaky=fail_on_flaky, shards_failed=bool(done.failed))
    assert got is status
    assert result.scenarios == 10 + (0 if second is None else 20)


def test_a_merged_finding_keeps_the_smallest_scenario_its_files_and_evidence(
    tmp_path: Path,
) -> None:
    report = tmp_path / "r"
    runs = [_shard(report, Shard(i, 2), [(VIOLATION, REPRODUCIBLE)]) for i in (2, 1)]
    merged = merge(jobs.read_shards(runs)[0])
    write_merged(merged, report, join_databases=False)
    result = jobs.merged_result(merged, report, budget_s=60.0, elapsed_s=61.0, max_world=2)
    (finding,) = result.findings
    assert (finding.seen, finding.label) == (2, REPRODUCIBLE)
    assert finding.scenario.launches == _scenario(1).launches  # shard 1's: one launch
    assert finding.report == f"evidence of {VIOLATION}"
    assert {p.suffix for p in finding.files} >= {".json", ".txt"}
    assert all(p.parent == report / "findings" for p in finding.files)
    assert (result.budget_s, result.elapsed_s, result.interrupted) == (60.0, 61.0, False)


def test_an_interrupted_shard_makes_the_merged_run_interrupted(tmp_path: Path) -> None:
    report = tmp_path / "r"
    runs = [
        _shard(report, Shard(1, 2), [(VIOLATION, REPRODUCIBLE)], interrupted=True),
        _shard(report, Shard(2, 2), []),
    ]
    merged = merge(jobs.read_shards(runs)[0])
    write_merged(merged, report, join_databases=False)
    result = jobs.merged_result(merged, report, budget_s=60.0, elapsed_s=61.0, max_world=2)
    assert exit_status(result) is ExitStatus.INTERRUPTED


def test_the_default_is_the_cpus_this_process_may_use() -> None:
    assert jobs.usable_cores() == len(os.sched_getaffinity(0))
