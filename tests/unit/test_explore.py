"""The explorer and its commands: signatures, bad input, a planted defect found and replayed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from zephon_chaos import cli
from zephon_chaos.explore.budget import parse_duration
from zephon_chaos.explore.findings import Finding
from zephon_chaos.explore.search import ExploreConfig, Explorer
from zephon_chaos.explore.signature import signature
from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.oracles.global_batches import Contract, Verdict
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import (
    ResumeFact,
    ScenarioOutcome,
    expected_failure_problems,
    failed_launch,
)
from zephon_chaos.scenario import SCENARIO_VERSION, Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankFault

PLANT = "skip_after_midwindow_resize"
PLANT_SIGNATURE = "batches-mid-window.missing.resized.mid-window"


def planted(plant: str | None = PLANT) -> Scenario:
    """The planted defect's true minimum: one rank with two lanes, mid-window, then two."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(1, 1, (CheckpointAt(0, 1),)), Launch(2, 1)),
        plant=plant,
    )


# ---- signatures ------------------------------------------------------------------------


def outcome(
    problems: list[Problem], verdict: Verdict | None = None, resumes: list[ResumeFact] | None = None
) -> ScenarioOutcome:
    return ScenarioOutcome(
        planted(None), None, problems=problems, verdict=verdict, resumes=resumes or []
    )


def failed(error: str | None, timed_out: bool = False) -> GroupResult:
    """A launch that failed with ``error`` on rank 1, or passed its deadline."""
    first = RankOutcome(1, 1, 0, None, 1, error=error)
    return GroupResult("g", [1], [first], timed_out, 1.0, Path("."), [], first_failure=first)


def batches(contract: Contract, kind: ProblemKind) -> Verdict:
    return Verdict(False, contract, [Problem(contract.area, kind, str(kind))])


SUCCEEDED = replace(failed(None), agent_returncodes=[0])
MID_RESIZE = [ResumeFact(1, 1, 2, True)]
SAME_BOUNDARY = [ResumeFact(1, 2, 2, False)]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (outcome([]), None),
        (
            outcome([], batches(Contract.MID_WINDOW, ProblemKind.MISSING), MID_RESIZE),
            "batches-mid-window.missing.resized.mid-window",
        ),
        (
            outcome(
                [],
                Verdict(
                    False,
                    Contract.MID_WINDOW,
                    [Problem(Area.BATCHES_MID_WINDOW, ProblemKind.WINDOW, "window 0")],
                    missing=[(0, 0, 1)],
                ),
                MID_RESIZE,
            ),
            "batches-mid-window.missing.resized.mid-window",
        ),
        (
            outcome([], batches(Contract.IDENTICAL, ProblemKind.DIVERGENT), SAME_BOUNDARY),
            "batches-identical.divergent.same-size.boundary",
        ),
        (
            outcome(
                [
                    Problem(Area.CHECKPOINT, ProblemKind.DIFFERS, "differs", checkpoint=0).in_phase(
                        1
                    )
                ],
                None,
                SAME_BOUNDARY,
            ),
            "checkpoint.differs.same-size.boundary",
        ),
        (
            outcome(expected_failure_problems(1, Launch(3, 1), SUCCEEDED)[0]),
            "refusal.accepted.no-resume.no-resume",
        ),
        (
            outcome([failed_launch(Area.LAUNCH, failed("KeyError: 'x'"), 0)]),
            "launch.KeyError.no-resume.no-resume",
        ),
        (
            outcome([failed_launch(Area.LAUNCH, failed("torch.distributed.DistError: x"), 0)]),
            "launch.DistError.no-resume.no-resume",
        ),
        (
            # A launch failure outranks the batch comparison it makes meaningless.
            outcome(
                [failed_launch(Area.LAUNCH, failed(None, timed_out=True), 1)],
                batches(Contract.IDENTICAL, ProblemKind.DUPLICATED),
                MID_RESIZE,
            ),
            "launch.timeout.resized.mid-window",
        ),
    ],
    ids=[
        "ok",
        "missing",
        "missing-first",
        "divergent",
        "checkpoint",
        "refusal",
        "launch",
        "dotted-error-type",
        "precedence",
    ],
)
def test_signature(case: ScenarioOutcome, expected: str | None) -> None:
    assert signature(case) == expected


@pytest.mark.parametrize(
    ("text", "seconds"), [("300", 300), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("2.5m", 150)]
)
def test_budget_formats(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


# ---- bad input -------------------------------------------------------------------------


def _scenario_file(tmp_path: Path, name: str, mutate=None) -> Path:
    raw = json.loads(planted().to_json())
    if mutate is not None:
        mutate(raw)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore", "--budget", "10x"], "--budget: '10x' is not a duration"),
        (["explore", "--tier", "gpu"], "--tier 'gpu': choose one of inproc, torchrun, both"),
        (["explore", "--max-phases", "9"], "--max-phases 9: must be within 1..5"),
        (["explore", "--plant", "nope"], "--plant 'nope': choose one of"),
        (["explore", "--profile", "fast"], "--profile 'fast': choose one of default, downstream"),
        (["run", "{missing}"], "cannot read scenario file"),
        (["replay", "{bad_json}"], "not JSON"),
        (["replay", "{newer}"], f".version: {SCENARIO_VERSION + 1} is newer"),
        (["run", "{bad_world}"], "launches[1].world_size"),
        (["run", "{signal}", "--tier", "inproc"], "launches[0].rank_faults[0].action"),
        (["replay", "{good}", "--tier", "gpu"], "--tier 'gpu'"),
    ],
    ids=[
        "budget",
        "tier",
        "phases",
        "plant",
        "profile",
        "missing-file",
        "malformed",
        "newer-version",
        "bad-field",
        "tier-cannot-run-it",
        "replay-tier",
    ],
)
def test_bad_flags_and_files_exit_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    files = {
        "missing": str(tmp_path / "missing.json"),
        "bad_json": str(_bad_json(tmp_path)),
        "newer": str(
            _scenario_file(tmp_path, "newer", lambda r: r.update(version=SCENARIO_VERSION + 1))
        ),
        "bad_world": str(
            _scenario_file(tmp_path, "world", lambda r: r["launches"][1].update(world_size=0))
        ),
        "signal": str(_signal_file(tmp_path)),
        "good": str(_scenario_file(tmp_path, "good")),
    }
    argv = [a.format(**files) for a in argv]
    if argv[0] == "explore":
        argv += ["--report", str(tmp_path / "report")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def _bad_json(tmp_path: Path) -> Path:
    path = tmp_path / "bad.json"
    path.write_text("{ not json")
    return path


def _signal_file(tmp_path: Path) -> Path:
    scenario = Scenario(launches=(Launch(2, 2, rank_faults=(RankFault(0, 1, "sigkill"),)),))
    return scenario.save(tmp_path / "signal.json")


FALSE_FINDINGS = {
    # refusal.accepted.same-size.boundary: 3 ranks over C=3 flagged as refused.
    "same-size-refusal": (
        lambda r: r["launches"][1].update(
            world_size=2, expect_failure=True, expect_error="must be >= dp_degree"
        ),
        "scenario.launches[1].expect_failure",
    ),
    # checkpoint.other.resized.boundary: a link fault on a launch of one rank.
    "one-rank-link-fault": (
        lambda r: r["launches"][0].update(
            proxy_faults=[
                {"rank": 0, "toxic": "reset_peer", "attributes": {"timeout": 0}, "at": "announce"}
            ]
        ),
        "scenario.launches[0].proxy_faults",
    ),
    "leader-point-on-a-follower": (
        lambda r: r["launches"][1].update(
            checkpoints=[{"step": 1}], proxy_faults=[{"rank": 1, "toxic": "down", "at": "outcome"}]
        ),
        "scenario.launches[1].proxy_faults[0].rank",
    ),
}


@pytest.mark.parametrize("name", sorted(FALSE_FINDINGS))
@pytest.mark.parametrize("command", ["run", "replay"])
def test_a_file_outside_the_validity_model_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, name: str
) -> None:
    mutate, field = FALSE_FINDINGS[name]
    path = _scenario_file(tmp_path, name, mutate)
    assert cli.main([command, str(path), "--tier", "torchrun"]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


# ---- run and replay --------------------------------------------------------------------


def test_run_and_replay_say_whether_a_scenario_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = planted().save(tmp_path / f"{PLANT_SIGNATURE}.json")
    passing = planted(None).save(tmp_path / "fixed.json")
    assert cli.main(["run", str(failing), "--tier", "inproc"]) == 1
    out = capsys.readouterr().out
    assert f"verdict: VIOLATION ({PLANT_SIGNATURE})" in out
    # The replay line names the user's file: the working folder is gone by now.
    assert f"replay: zephon-chaos replay {failing.resolve()}" in out
    assert cli.main(["replay", str(failing)]) == 1  # auto picks the in-process tier
    assert f"still fails as recorded ({PLANT_SIGNATURE})" in capsys.readouterr().out
    assert cli.main(["replay", str(passing), "--tier", "inproc"]) == 0
    assert "no longer fails" in capsys.readouterr().out
    assert cli.main(["run", str(passing), "--tier", "inproc"]) == 0


# ---- the planted defect: found, shrunk to its true minimum, replayed ----------------------


def _shrunk(findings: dict[str, Finding]) -> bool:
    found = findings.get(PLANT_SIGNATURE)
    return found is not None and found.shrunk_s is not None


def test_explore_finds_and_shrinks_the_planted_defect_in_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    result = Explorer(
        ExploreConfig(
            budget_s=300,
            report_dir=report,
            tier="inproc",
            seed=3,
            max_world=3,
            max_phases=3,
            plant=PLANT,
            shrink_s=120,  # generous: shrinking ends when Hypothesis is done, not at this bound
            stop_when=_shrunk,
        )
    ).run()
    finding = next(f for f in result.findings if f.signature == PLANT_SIGNATURE)
    minimal = finding.scenario
    assert [ph.world_size for ph in minimal.launches] == [1, 2], minimal.summary()
    # Two minimal forms, equally small: C=2 with a mid-window checkpoint, or C=3 with one on
    # a step boundary, which the resize to 2 ranks (3 lanes on 2) puts mid-window.
    assert minimal.pipeline.canonical_replicas in (2, 3)
    assert finding.label == "reproducible"
    assert not any(ph.rank_faults for ph in minimal.launches)
    saved = report / "findings" / f"{PLANT_SIGNATURE}.json"
    assert Scenario.load(saved).launches == minimal.launches
    assert (report / "findings" / f"{PLANT_SIGNATURE}.png").stat().st_size > 0
    assert (report / "timeline.png").stat().st_size > 0
    summary = (report / "summary.md").read_text()
    assert f"zephon-chaos replay {saved} --tier inproc" in summary
    assert "## Coverage" in summary
    capsys.readouterr()
    assert cli.main(["replay", str(saved), "--tier", "inproc"]) == 1
    assert "still fails as recorded" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.cpu
def test_the_planted_defect_found_in_process_reproduces_on_torchrun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    result = Explorer(
        ExploreConfig(
            budget_s=600,
            report_dir=report,
            tier="both",
            seed=3,
            max_world=3,
            max_phases=3,
            plant=PLANT,
            shrink_s=20,
            stop_when=_shrunk,
        )
    ).run()
    finding = next(f for f in result.findings if f.signature == PLANT_SIGNATURE)
    assert [ph.world_size for ph in finding.scenario.launches] == [1, 2]
    assert finding.confirmed_on == {"torchrun": PLANT_SIGNATURE}
    saved = report / "findings" / f"{PLANT_SIGNATURE}.json"
    capsys.readouterr()
    assert cli.main(["replay", str(saved), "--tier", "torchrun"]) == 1
    assert "still fails as recorded" in capsys.readouterr().out


# ---- budget and interruption -----------------------------------------------------------


@pytest.mark.parametrize(
    ("signum", "code", "jobs"),
    [(signal.SIGINT, 130, "1"), (signal.SIGTERM, 143, "1"), (signal.SIGINT, 130, "2")],
    ids=["ctrl-c", "sigterm", "ctrl-c-two-jobs"],
)
@pytest.mark.usefixtures("sigint_heard")
def test_ctrl_c_stops_cleanly_and_writes_the_report_so_far(
    tmp_path: Path, signum: signal.Signals, code: int, jobs: str
) -> None:
    """SIGINT (or SIGTERM: a cancelled job) once scenarios run: exit 130 (143), a summary
    marked interrupted, nothing left; with ``--jobs 2`` the parent passes it on to its
    shards and merges what they wrote."""
    report, tmp = tmp_path / "report", tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zephon_chaos.cli",
            "explore",
            "--budget",
            "5m",
            "--report",
            str(report),
            "--seed",
            "1",
            "--jobs",
            jobs,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        # The second scenario's folder exists once the first was judged.
        while not list(tmp.glob("zc-explore-*/inproc/s2")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no scenario ran within 120 s"
            time.sleep(0.05)
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert "interrupted; everything started was stopped" in err
    assert "scenarios" in out
    assert "interrupted" in (report / "summary.md").read_text()
    assert not list(tmp.glob("zc-explore-*")), "the working folder was left behind"
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_polishing_stays_in_the_space_the_strategies_generate() -> None:
    """Dropping the dry last launch over finite data must not leave a launch that stops
    before the data runs out: the oracle expects lanes in lockstep there, which uneven
    finite lanes do not keep (a false 'duplicated' finding was seen that way)."""
    from zephon_chaos.explore.polish import polish
    from zephon_chaos.strategies import RUN_DRY_STEPS
    from zephon_chaos.workload.spec import DataSpec, SourceSpec

    finite = Scenario(
        data=DataSpec(sources=(SourceSpec("a", (12,), exhausted="stop"),), chunk_size=8),
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(1, 1, (CheckpointAt(0),)), Launch(1, RUN_DRY_STEPS)),
        name="finite",
    ).validate()
    judged: list[Scenario] = []

    def judge(s: Scenario) -> str | None:
        """Fails as long as a launch checkpoints: polishing must then drop the last launch."""
        judged.append(s)
        return "some.signature" if any(ph.checkpoints for ph in s.launches) else None

    best = polish(finite, "some.signature", judge, time.monotonic() + 30)
    assert judged, "polishing tried nothing"
    assert all(s.launches[-1].steps == RUN_DRY_STEPS for s in judged)
    assert len(best.launches) == 1 and best.launches[0].steps == RUN_DRY_STEPS
    assert best.launches[0].checkpoints


@pytest.mark.parametrize("profile", ["default", "downstream"])
def test_the_profile_flag_reaches_the_search(tmp_path: Path, profile: str) -> None:
    from zephon_chaos.cli import build_parser
    from zephon_chaos.commands.explore import _config

    argv = ["explore", "--report", str(tmp_path / "r"), "--tier", "torchrun"]
    args = build_parser().parse_args([*argv, "--profile", profile])
    assert _config(args).profile == profile
