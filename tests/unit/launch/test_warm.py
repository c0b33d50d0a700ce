"""The warm lane: groups forked from a pre-warmed server behave like CLI groups, only faster."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.launch.test_group import CASES, MISBEHAVIOURS, misbehaviour_env
from zephon_chaos.fixtures.warm_lane import warm_launcher_for
from zephon_chaos.launch import LAUNCH_PATHS, GroupResult, LaunchSpec
from zephon_chaos.launch.warm import (
    WARM_NOTE,
    WarmGroup,
    WarmServerProcess,
    fork_unsafe_reason,
    server_survivors,
    warm_launcher,
)
from zephon_chaos.procs import exit_notes
from zephon_chaos.recipe import ENV_BACKEND
from zephon_chaos.runner import Launcher, ScenarioRunner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import read_phase
from zephon_chaos.workload.spec import CheckpointAt, DataSpec, PipelineSpec, WorkloadSpec

SHAPES = [(path, 1, 2) for path in LAUNCH_PATHS] + [("c10d", 2, 1)]


@pytest.fixture
def warm_launch(
    request: pytest.FixtureRequest, chaos_warm_server: WarmServerProcess, torchrun_group
) -> Launcher:
    """The session's warm server is a static dependency: it exists before the leak snapshot."""
    return warm_launcher_for(request, torchrun_group)


@pytest.mark.cpu
@pytest.mark.parametrize(("path", "nnodes", "nproc"), SHAPES)
def test_a_warm_group_runs_and_records_its_forked_workers(
    warm_launch: Launcher,
    torchrun_group,
    allreduce_script: Path,
    tmp_path: Path,
    path: str,
    nnodes: int,
    nproc: int,
) -> None:
    result = warm_launch(
        LaunchSpec(
            entry=allreduce_script,
            nproc=nproc,
            nnodes=nnodes,
            path=path,  # type: ignore[arg-type]
            env={"ALLREDUCE_OUT": str(tmp_path)},
            deadline_s=60,
            name=f"warm-{path}",
        )
    ).raise_for_status()
    world = nproc * nnodes
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert {r["sum"] for r in reports} == {float(sum(range(world)))}
    assert WARM_NOTE in result.notes
    group = torchrun_group.groups[-1]
    assert isinstance(group, WarmGroup)
    agents = {a.pid for a in group.agents}
    workers = group.workers()
    records = group.worker_records()
    assert sorted(workers) == list(range(world))
    for rank, pid_id in workers.items():
        assert records[pid_id]["forked"] is True and records[pid_id]["ppid"] in agents
        assert result.rank(rank).pid == pid_id.pid and result.rank(rank).exitcode == 0
    assert "sum=" in result.rank(world - 1).stdout.read_text()
    assert set(workers.values()) <= set(exit_notes(group.registry.pid_dir))
    assert group.registry.survivors() == []


@pytest.mark.cpu
def test_a_warm_group_under_a_relative_folder_runs(
    chaos_warm_server: WarmServerProcess,
    chaos_tmp_root: Path,
    torchrun_group,
    allreduce_script: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``zephon-chaos run --keep DIR`` hands the launcher a relative folder; the server,
    which runs in a folder of its own, must still find the agent's log there."""
    monkeypatch.chdir(chaos_tmp_root)
    register = torchrun_group.groups.append
    launch = warm_launcher(chaos_warm_server, Path("relative"), on_group=register)
    spec = LaunchSpec(entry=allreduce_script, env={"ALLREDUCE_OUT": str(chaos_tmp_root)})
    result = launch(replace(spec, deadline_s=60, name="warm-relative"))
    assert result.ok, result.report()
    assert (chaos_tmp_root / "relative" / "warm-relative" / "agent0-attempt1.log").is_file()


@pytest.mark.cpu
@pytest.mark.parametrize("case", CASES)
def test_a_failing_warm_rank_is_reported_in_words(
    warm_launch: Launcher, allreduce_script: Path, case: str
) -> None:
    m = MISBEHAVIOURS[case]
    env = misbehaviour_env(case)
    result = warm_launch(LaunchSpec(entry=allreduce_script, env=env, deadline_s=60))
    assert not result.ok and not result.timed_out
    assert result.first_failure is not None and result.first_failure.rank == 1, result.report()
    assert result.rank(1).status.startswith(m.statuses)
    assert m.evidence in result.report()


@pytest.mark.cpu
def test_the_deadline_kills_a_hanging_warm_group_and_the_server_goes_on(
    warm_launch: Launcher, torchrun_group, allreduce_script: Path
) -> None:
    result = warm_launch(
        LaunchSpec(
            entry=allreduce_script,
            env={"ALLREDUCE_MISBEHAVE": "1:hang"},
            deadline_s=10,
            name="hang",
        )
    )
    assert result.timed_out and "passed its deadline" in result.summary()
    assert "rank 1 hangs on purpose" in result.rank(1).tail("stdout")
    assert all(o.killed_by_harness and o.pid for o in result.ranks)
    assert torchrun_group.groups[-1].registry.survivors() == []
    assert warm_launch(LaunchSpec(entry=allreduce_script, deadline_s=60, name="after")).ok


def _wait_for_workers(group: WarmGroup, count: int) -> None:
    """Until ``count`` workers recorded their PIDs (a file appears: no event to wait on)."""
    end = time.monotonic() + 60
    while len(group.workers()) < count and time.monotonic() < end:
        group.server.pump(0.05)
    assert len(group.workers()) == count, "the workers never recorded their PIDs"


@pytest.mark.cpu
@pytest.mark.parametrize(
    ("target", "status"),
    [("agent", "killed by SIGKILL"), ("rank 1", "killed by SIGTERM")],
)
def test_forked_ranks_die_as_exec_d_ranks_do(
    warm_launch: Launcher, torchrun_group, chaos_warm_server: WarmServerProcess,
    chaos_tmp_root: Path, allreduce_script: Path, target: str, status: str,
) -> None:
    """No inherited agent handler or parent-death signal: a SIGTERM'd rank dies of SIGTERM,
    and the ranks of a killed agent live on as orphans until the harness reaps them."""
    group = WarmGroup(
        LaunchSpec(entry=allreduce_script, env={"ALLREDUCE_MISBEHAVE": "1:hang"}, deadline_s=60),
        chaos_tmp_root / f"signal-{target.replace(' ', '')}",
        chaos_warm_server,
    )
    torchrun_group.groups.append(group)
    group.start()
    _wait_for_workers(group, 2)
    if target == "agent":
        group.signal_agent(0, signal.SIGKILL)
        result = group.wait()
        assert result.agent_returncodes == [-signal.SIGKILL]
        assert all(r.killed_by_harness for r in result.ranks), "a rank died with its agent"
    else:
        group.signal_rank(1, signal.SIGTERM)
        result = group.wait()
        assert result.rank(1).status == status and result.rank(1).error is None
    assert group.registry.survivors() == []


def _batches(records: list) -> list[list[tuple]]:
    return [
        [(b.index, b.lane, [tuple(i) for i in b.ids], b.checkpoints_before) for b in r.batches]
        for r in records
    ]


def _checkpoints(records: list) -> list[list[tuple]]:
    """What a checkpoint covered (its digest includes prefetch progress, which is timing)."""
    return [
        [(c.index, c.after_batches, c.ok, c.lanes_covered, c.lane_counts) for c in r.checkpoints]
        for r in records
    ]


@pytest.mark.cpu
def test_warm_and_cli_launches_give_identical_records_and_verdicts(
    warm_launch: Launcher, torchrun_group, chaos_tmp_root: Path
) -> None:
    scenario = Scenario(
        data=DataSpec(),
        pipeline=PipelineSpec(canonical_replicas=6),
        launches=(Launch(2, 3, (CheckpointAt(2),)), Launch(3, 2)),
        name="warm-vs-cli",
    )
    launchers = {"cli": torchrun_group.run_spec, "warm": warm_launch}
    outcomes = {
        lane: ScenarioRunner(chaos_tmp_root / lane, launcher=launcher).run(scenario)
        for lane, launcher in launchers.items()
    }
    cli, warm = outcomes["cli"], outcomes["warm"]
    assert cli.ok and warm.ok, cli.report() + "\n" + warm.report()
    runs = {lane: [o.reference, *o.phases] for lane, o in outcomes.items()}
    for cli_run, warm_run in zip(runs["cli"], runs["warm"], strict=True):
        assert WARM_NOTE in warm_run.result.notes and WARM_NOTE not in cli_run.result.notes
        world = cli_run.phase.world_size
        assert _batches(read_phase(Path(warm_run.spec.out_dir), world)) == _batches(
            read_phase(Path(cli_run.spec.out_dir), world)
        )
        assert _checkpoints(warm_run.records) == _checkpoints(cli_run.records)
    assert warm.verdict == cli.verdict


@pytest.mark.parametrize(("backend", "forked"), [("gloo", True), ("nccl", False)])
def test_a_recipe_on_nccl_is_not_forked(tmp_path: Path, backend: str, forked: bool) -> None:
    """``recipe_run`` names the backend in the recipe contract's environment, not a spec file."""
    spec = LaunchSpec(tmp_path / "train.py", env={ENV_BACKEND: backend}, name="recipe")
    found = fork_unsafe_reason(spec, None)
    assert (found is None) == forked, found
    assert forked or "nccl" in str(found)


def _stub_result(spec: LaunchSpec) -> GroupResult:
    return GroupResult(spec.name, [0], [], False, 0.0, Path("."), [])


@pytest.mark.parametrize(
    ("backend", "cuda", "reason"),
    [
        ("gloo", False, None),
        ("nccl", False, "the workload runs on nccl"),
        ("gloo", True, "CUDA is initialized in the warm server"),
    ],
)
def test_fork_unsafe_launches_take_the_cli_path_and_say_so(
    tmp_path: Path, backend: str, cuda: bool, reason: str | None
) -> None:
    spec_file = WorkloadSpec(backend=backend).write(tmp_path / "spec.json")  # type: ignore[arg-type]
    spec = LaunchSpec("zephon_chaos.rank", args=[str(spec_file)], module=True, name="g")
    server = WarmServerProcess(tmp_path / "server")  # never started: no fork may happen
    server.info = {"cuda_initialized": cuda}
    found = fork_unsafe_reason(spec, server)
    if reason is None:
        assert found is None
        return
    assert found is not None and reason in found
    taken: list[LaunchSpec] = []
    result = warm_launcher(server, tmp_path, fallback=lambda s: taken.append(s) or _stub_result(s))(
        spec
    )
    assert taken == [spec]
    assert f"warm lane not used ({found}); launched by the CLI path" in result.summary()


@pytest.mark.cpu
def test_closing_a_warm_server_kills_everything_it_forked(
    tmp_path: Path, allreduce_script: Path
) -> None:
    server = WarmServerProcess(tmp_path / "server").start()
    try:
        group = WarmGroup(
            LaunchSpec(entry=allreduce_script, env={"ALLREDUCE_MISBEHAVE": "1:hang"}),
            tmp_path / "g",
            server,
        ).start()
        _wait_for_workers(group, 2)
    finally:
        survivors = server.close()
    assert survivors == [] and server_survivors(server) == []
    assert group.registry.survivors() == []
    assert group.kill() == [], "the group's own processes (its death watch) end with it"
    assert server.proc is not None and server.proc.poll() is not None


def test_a_failure_torchelastic_sees_first_still_lists_every_worker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker that fails between the agent's own look and torchelastic's: torchelastic's
    fork path stops the rest and names that one alone; the agent lists every worker."""
    from types import SimpleNamespace

    from torch.distributed.elastic.multiprocessing.api import (
        MultiprocessContext,
        ProcessFailure,
        RunProcsResult,
    )

    from zephon_chaos.launch import warm_agent

    procs = [SimpleNamespace(pid=10**7 + r, exitcode=None) for r in range(2)]
    errors = {r: str(tmp_path / f"error{r}.json") for r in range(2)}

    def torchelastic_poll(ctx: object) -> RunProcsResult:
        procs[1].exitcode, procs[0].exitcode = 1, -signal.SIGTERM  # it failed; rank 0 stopped
        only = ProcessFailure(local_rank=1, pid=procs[1].pid, exitcode=1, error_file=errors[1])
        return RunProcsResult(failures={1: only}, stdouts={}, stderrs={})

    monkeypatch.setattr(MultiprocessContext, "_poll", torchelastic_poll)
    monkeypatch.setattr(MultiprocessContext, "_start", MultiprocessContext._start)
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # no SIGCHLD handler in pytest
    warm_agent._report_every_failed_worker()
    ctx = SimpleNamespace(
        _pc=SimpleNamespace(processes=procs), error_files=errors, stdouts={}, stderrs={}
    )
    result = MultiprocessContext._poll(ctx)  # type: ignore[arg-type]
    assert {r: f.exitcode for r, f in result.failures.items()} == {0: -signal.SIGTERM, 1: 1}


@pytest.mark.cpu
@pytest.mark.parametrize("lane", ["warm", "cli"])
def test_a_failing_ranks_error_file_is_written_whole_or_not_at_all(
    warm_launch: Launcher, torchrun_group, allreduce_script: Path, lane: str
) -> None:
    """A rank caught (here: killed for certain) inside an in-place write of its error file
    leaves it empty, and torchelastic's agent crashes reading it. The workload writes it
    atomically; nothing else in a rank of either lane may write it in place."""
    launch = {"warm": warm_launch, "cli": torchrun_group.run_spec}[lane]
    env = {**misbehaviour_env("raise"), "ALLREDUCE_BYSTANDER": "wait"}
    env["ALLREDUCE_STOP_IN_PLACE_WRITES"] = "1"
    result = launch(LaunchSpec(entry=allreduce_script, env=env, deadline_s=60, name=lane))
    report = result.report()
    assert not any("crashed reading" in note for note in result.notes), report
    assert result.first_failure is not None and result.first_failure.rank == 1, report
    assert result.rank(1).status.startswith(MISBEHAVIOURS["raise"].statuses), report
    assert result.rank(1).error == "RuntimeError: rank 1 fails on purpose", report
    assert result.rank(0).status == "killed by SIGTERM", report


def _run_as_torchelastic_runs_a_forked_worker(script: str, error_file: str) -> None:
    """What torchelastic's fork path does around the entry point: its own ``record``."""
    from torch.distributed.elastic.multiprocessing.errors import record

    from zephon_chaos.launch.warm_agent import worker_main

    os.environ["TORCHELASTIC_ERROR_FILE"] = error_file
    record(worker_main)(sys.executable, "-u", script)


@pytest.mark.parametrize(
    ("raised", "exitcode"),
    [
        ("RuntimeError('boom')", 1),
        ("KeyboardInterrupt()", -signal.SIGINT),
        ("SignalException('stopped', signal.SIGTERM)", -signal.SIGTERM),
    ],
)
def test_a_forked_rank_ends_on_an_uncaught_exception_as_an_exec_d_one_does(
    tmp_path: Path, raised: str, exitcode: int
) -> None:
    """Status 1, or death by the signal, and torch's wrapper writes no error file."""
    script = tmp_path / "rank.py"
    script.write_text(
        "import signal\n"
        "from torch.distributed.elastic.multiprocessing.api import SignalException\n"
        f"raise {raised}\n"
    )
    error_file = tmp_path / "error.json"
    proc = multiprocessing.get_context("fork").Process(
        target=_run_as_torchelastic_runs_a_forked_worker, args=(str(script), str(error_file))
    )
    proc.start()
    proc.join(timeout=60)
    if proc.is_alive():
        proc.kill()
        proc.join()
    assert proc.exitcode == exitcode
    assert not error_file.exists(), error_file.read_text()
