"""The in-process tier: rank threads with real Zephon pipelines, judged by the same oracles."""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_scenario import workers_killed
from zephon_chaos.faults.proxy.client import ToxiproxyClient
from zephon_chaos.fixtures.toxiproxy import EchoServer
from zephon_chaos.inproc import InprocLauncher, TierRefusal, inproc_refusal, inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.launch.launch_spec import LaunchSpec
from zephon_chaos.runner import workload_spec
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import read_phase
from zephon_chaos.workload.spec import (
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    SourceSpec,
    WorkloadSpec,
)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[InprocScenarioRunner]:
    with inproc_runner(tmp_path / "inproc") as r:
        yield r
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-s")]


BOUNDARY = CheckpointAt(2)


def resize(c: int = 6, checkpoint: CheckpointAt = BOUNDARY, **pipeline: object) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=c, **pipeline),  # type: ignore[arg-type]
        launches=(Launch(2, 3, (checkpoint,)), Launch(3, 2)),
    )


@pytest.mark.parametrize("aggregation", ["store", "store_explicit", "dir"])
def test_a_resize_on_a_window_boundary_keeps_global_batches(
    runner: InprocScenarioRunner, aggregation: str
) -> None:
    outcome = runner.run(resize(aggregation=aggregation))
    assert outcome.ok, outcome.report()
    assert outcome.verdict is not None and outcome.verdict.contract == "identical global batches"
    assert [r.result.ok for r in outcome.phases] == [True, True]


@pytest.mark.parametrize(
    "pipeline",
    [{}, {"aggregate_serializer": "json", "aggregate_compressor": "none", "prefetch_batches": 0}],
    ids=["zephon-defaults", "json-codec-no-prefetch"],
)
def test_a_checkpoint_persisted_as_plain_json_resumes_a_resize(
    runner: InprocScenarioRunner, pipeline: dict[str, object]
) -> None:
    """``json.dumps`` turns lane ids into strings and tuples into lists: restore takes it."""
    outcome = runner.run(resize(**pipeline).with_(persist_format="plain_json"))
    assert outcome.ok, outcome.report()
    assert outcome.verdict is not None and outcome.verdict.contract == "identical global batches"


def test_rank_threads_write_the_workloads_records(runner: InprocScenarioRunner) -> None:
    outcome = runner.run(resize(checkpoint=CheckpointAt(1, 1)))
    assert outcome.ok, outcome.report()
    phase0 = outcome.phases[0]
    records = read_phase(phase0.spec.out_dir, 2)
    assert all(r.began for r in records)  # the record that tells a hang of theirs from a setup's
    assert [r.lanes for r in records] == [[0, 1, 2], [3, 4, 5]]
    assert [len(r.batches) for r in records] == [9, 9]
    (ckpt,) = {c.digest for r in records for c in r.checkpoints}
    assert ckpt is not None
    # Rank 0 merges, so it alone warns; the warning reached its thread's record only,
    # though warning hooks are process-global.
    warned = [any("mid-window" in w for w in r.checkpoints[0].warnings) for r in records]
    assert warned == [True, False]


def test_more_ranks_than_lanes_is_refused_with_zephons_error(runner: InprocScenarioRunner) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(
            Launch(2, 1, (CheckpointAt(1),)),
            Launch(3, 1, expect_failure=True, expect_error="must be >= dp_degree"),
            Launch(1, 2),
        ),
    )
    outcome = runner.run(scenario)
    assert outcome.ok, outcome.report()
    refused = outcome.phases[1].result
    assert not refused.ok and refused.first_failure is not None
    assert "must be >= dp_degree (3)" in (refused.first_failure.error or "")


def test_a_refusal_with_the_wrong_error_is_a_problem(runner: InprocScenarioRunner) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(3, 1, expect_failure=True, expect_error="some other error"),),
    )
    outcome = runner.run(scenario)
    assert not outcome.ok
    assert "not with 'some other error'" in outcome.problems[0].text


def test_a_crash_relaunches_from_the_checkpoint_before_it(runner: InprocScenarioRunner) -> None:
    """Rank 1 raises at step 3: checkpoint 1 (step 2) is the last both ranks took."""
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        launches=(
            Launch(2, 2, (CheckpointAt(1),)),
            Launch(
                2, 4, (CheckpointAt(1), CheckpointAt(2)), rank_faults=(RankFault(1, 3, "raise"),)
            ),
            Launch(2, 2, rank_faults=(RankFault(0, 0, "raise"),)),
            Launch(3, 2),
        ),
    )
    outcome = runner.run(scenario)
    assert outcome.ok, outcome.report()
    crashed = outcome.phases[1]
    assert crashed.result.first_failure is not None
    assert crashed.result.first_failure.rank == 1
    assert "scheduled fault" in (crashed.result.first_failure.error or "")
    assert crashed.result.rank(0).exitcode == -15  # stopped with its group, like torchrun's
    assert [(r.from_world, r.to_world) for r in outcome.resumes] == [(2, 2), (2, 2), (2, 3)]
    # The relaunch after the second crash restored the same checkpoint as that crash did.
    assert outcome.phases[3].spec.restore_from == outcome.phases[2].spec.restore_from


def test_a_checkpoint_when_the_data_ran_out_resumes_to_the_rest(
    runner: InprocScenarioRunner,
) -> None:
    data = DataSpec(
        sources=(SourceSpec("a", shards=(13, 9), exhausted="stop"),), chunk_size=4, microbatch=2
    )
    scenario = Scenario(
        data=data,
        pipeline=PipelineSpec(canonical_replicas=4),
        launches=(Launch(2, 8, (CheckpointAt(6),)), Launch(3, 1000)),
    )
    outcome = runner.run(scenario)
    assert outcome.ok, outcome.report()
    assert all(r.exhausted_after is not None for r in outcome.phases[0].records)
    taken = [c.after_batches for r in outcome.phases[0].records for c in r.checkpoints]
    assert len(taken) == 2  # both ranks took it, after their data ran out


@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        (resize(runner="process"), "pipeline.runner"),
        (resize(mtp_mode=True), "pipeline.mtp_mode"),
        (
            Scenario(launches=(Launch(2, 2, rank_faults=(RankFault(0, 1, "sigkill"),)),)),
            "launches[0].rank_faults[0].action",
        ),
        (Scenario(launches=(Launch(2, 2, path="c10d"),)), "launches[0].path"),
        (resize().with_(persist_format="dcp"), "persist_format"),
    ],
    ids=["process-runner", "mtp-mode", "signal", "launch-path", "dcp-persistence"],
)
def test_what_needs_processes_is_refused_naming_the_field(
    runner: InprocScenarioRunner, scenario: Scenario, field: str
) -> None:
    with pytest.raises(TierRefusal) as refusal:
        runner.run(scenario)
    assert f"scenario.{field}:" in str(refusal.value)
    assert "--tier torchrun" in str(refusal.value)


def test_a_child_fault_is_refused_in_process_naming_the_field() -> None:
    """Rank threads share one process, so no rank has worker processes of its own to kill:
    even drawn beside the inline runner (which the tier runs), the fault is refused."""
    inline = workers_killed().with_(pipeline=PipelineSpec(canonical_replicas=2))
    reason = inproc_refusal(inline)
    assert reason is not None and reason.startswith("scenario.launches[0].child_faults:")
    assert "--tier torchrun" in reason
    assert inproc_refusal(inline.with_(launches=(Launch(2, 2), Launch(2, 1)))) is None
    assert inproc_refusal(workers_killed().validate()) is not None  # runner 'process'


def _launch_of(
    tmp_path: Path, scenario: Scenario, deadline_s: float, name: str, **spec: str
) -> LaunchSpec:
    """The launch of ``scenario``'s first phase on 2 rank threads (``spec``: fields of its
    workload spec to set)."""
    out = tmp_path / "phase0"
    out.mkdir()
    wspec = dataclasses.replace(workload_spec(scenario, 0, out, tmp_path / "data"), **spec)
    spec_file = wspec.write(out / "spec.json")
    return LaunchSpec(
        entry="zephon_chaos.rank",
        module=True,
        args=[str(spec_file)],
        nproc=2,
        deadline_s=deadline_s,
        name=name,
    )


def test_a_launch_past_its_deadline_stops_every_rank_thread(tmp_path: Path) -> None:
    """Threads cannot be killed: past the deadline they stop at their next step. The launcher
    joins them (the threads' own end is the event); the grace is only a bound, generous so
    that a loaded machine cannot fail the test by being slow."""
    import zephon  # noqa: F401  (imported up front: the deadline is for the rank loop)

    scenario = Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(Launch(2, 400),))
    with InprocLauncher(tmpdir=tmp_path / "tmp", join_grace_s=120.0) as launcher:
        result = launcher(_launch_of(tmp_path, scenario, deadline_s=0.05, name="late"))
    assert result.timed_out and not result.ok
    assert set(result.stacks) == {"zc-late-rank0", "zc-late-rank1"} or result.stacks == {}
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-late")]


class _CtrlCInTheJoin(InprocLauncher):
    """Ctrl-C lands while the launcher waits for its rank threads."""

    def _join(self, threads, group, host, deadline, cut_links=None):  # type: ignore[no-untyped-def]
        if not group.failed.is_set():
            raise KeyboardInterrupt
        return super()._join(threads, group, host, deadline, cut_links)


@pytest.mark.parametrize("aggregation", ["store", "dir"])
def test_an_interrupted_launch_ends_its_rank_threads_before_it_returns(
    tmp_path: Path, aggregation: str
) -> None:
    """The caller removes the launch's folders next (explore's working folder): a rank left
    running wrote into them while they were removed, and the folder stayed behind."""
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregation=aggregation),  # type: ignore[arg-type]
        launches=(Launch(2, 400, (CheckpointAt(50),)),),
    )
    folder = {"aggregate_dir": str(tmp_path / "aggregate")} if aggregation == "dir" else {}
    launch = _launch_of(tmp_path, scenario, deadline_s=600, name="ctrlc", **folder)
    with _CtrlCInTheJoin(tmpdir=tmp_path / "tmp", join_grace_s=120.0) as launcher:
        with pytest.raises(KeyboardInterrupt):
            launcher(launch)
        assert not [t for t in threading.enumerate() if t.name.startswith("zc-ctrlc")]


@pytest.mark.parametrize("aggregation", ["store_explicit", "dir"])
def test_a_rank_waiting_on_a_peer_that_failed_is_torn_down_as_torchrun_would(
    runner: InprocScenarioRunner, aggregation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 enters its checkpoint; only then does rank 1 fail, so rank 0 waits in the round
    on a store or folder the launch does not own. Its group ends it there, as an agent kills
    a failed group's processes, instead of it failing later by Zephon's own timeout."""

    import zephon_chaos.inproc.launcher as launcher

    real = launcher.run_rank
    entered = threading.Event()

    def rank_1_fails(spec, rank, world, **kwargs):  # type: ignore[no-untyped-def]
        if Path(spec.out_dir).name != "phase0":  # the reference run
            return real(spec, rank, world, **kwargs)
        hooks = kwargs["hooks"]
        mine = hooks.before_checkpoint

        def before_checkpoint(index: int) -> None:
            mine(index)  # the group's own stop check comes first, as in every launch
            if rank == 0:
                entered.set()
            elif entered.wait(60):
                raise ValueError("rank 1 fails on purpose")

        kwargs["hooks"] = dataclasses.replace(hooks, before_checkpoint=before_checkpoint)
        return real(spec, rank, world, **kwargs)

    monkeypatch.setattr(launcher, "run_rank", rank_1_fails)
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregation=aggregation),  # type: ignore[arg-type]
        launches=(Launch(2, 2, (CheckpointAt(1),)),),
    )
    outcome = runner.run(scenario)
    result = outcome.phases[0].result
    assert result.first_failure is not None and result.first_failure.rank == 1
    rank0 = result.ranks[0]
    assert rank0.killed_by_harness, result.summary()
    assert rank0.error is not None and rank0.error.startswith("GroupTornDown"), rank0.error


def _frames(*calls: tuple[str, str]) -> object:
    """A stack of fake frames, innermost first: (file, function) each."""
    from types import SimpleNamespace

    frame = None
    for path, name in reversed(calls):
        code = SimpleNamespace(co_filename=path, co_name=name)
        frame = SimpleNamespace(f_code=code, f_back=frame)
    return frame


ZEPHON = "/x/zephon/_internal/"


@pytest.mark.parametrize(
    ("stack", "torn_down"),
    [
        (((ZEPHON + "coordination.py", "_wait_until"), (ZEPHON + "engine.py", "merge")), True),
        (((ZEPHON + "kvstore.py", "wait"), (ZEPHON + "coordination.py", "_wait_for_acks")), True),
        (((ZEPHON + "kvstore.py", "_client"), (ZEPHON + "kvstore.py", "_call")), False),
        ((("/x/filelock/_core/_acquire.py", "acquire"), (ZEPHON + "io/handle.py", "open")), False),
        ((("/x/threading.py", "start"), (ZEPHON + "engine.py", "start")), False),
        ((), False),
    ],
    ids=["round-wait", "store-wait", "store-connect", "file-lock", "thread-start", "no-frame"],
)
def test_the_tear_down_raises_only_in_a_rank_waiting_in_zephon(
    stack: tuple[str, ...], torn_down: bool
) -> None:
    """An asynchronous exception elsewhere can land inside a library's critical section (a
    file lock half taken stays held, and the next launch over the same data waits forever)."""
    from zephon_chaos.inproc.launcher import _waiting_in_zephon

    assert _waiting_in_zephon(_frames(*stack)) is torn_down


class _Finalized:
    """An object whose finalizer raises ``exc`` (as a teardown landing in it would)."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __del__(self) -> None:
        raise self.exc


def test_a_teardown_a_finalizer_ignored_is_noted_and_any_other_error_still_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python prints what a finalizer ignores; the teardown's own becomes a note of the
    launch, and every other such error still reaches the hook that was there."""
    import sys

    from zephon_chaos.inproc.launcher import teardowns_in_finalizers
    from zephon_chaos.inproc.rank_group import GroupTornDown

    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    landed: list[str] = []
    with teardowns_in_finalizers(landed):
        _Finalized(GroupTornDown())
        _Finalized(ValueError("a finalizer's own error"))
    assert len(landed) == 1 and "_Finalized.__del__, a finalizer" in landed[0], landed
    assert [type(e) for e in reported] == [ValueError]
    _Finalized(GroupTornDown())  # outside a launch: reported as Python would
    assert [type(e) for e in reported] == [ValueError, GroupTornDown]


def test_cutting_the_links_ends_their_connections_and_leaves_the_proxies_serving(
    toxiproxy: ToxiproxyClient, echo_server: EchoServer
) -> None:
    """A torn-down rank's call on its link ends, and its reconnects (Zephon's clean-up makes a
    new client per store call) reach the store at once: on a proxy left disabled c10d retries
    each refused connect for T, and a leader's ack clean-up overran its failure bound so."""
    from zephon_chaos.inproc.launcher import _cut_links

    serving = toxiproxy.create_proxy("zc-cut-r0", echo_server.upstream)
    down = toxiproxy.create_proxy("zc-cut-r1", echo_server.upstream, enabled=False)
    spec = WorkloadSpec(
        store_proxy_names={"0": serving.name, "1": down.name}, proxy_api_url=toxiproxy.url
    )
    with socket.create_connection(("127.0.0.1", serving.port), timeout=5) as live:
        live.sendall(b"ping")
        assert live.recv(4) == b"ping"
        _cut_links(spec)
        try:
            ended = live.recv(1) == b""
        except ConnectionResetError:
            ended = True
        assert ended, "the live connection survived the cut"
    with socket.create_connection(("127.0.0.1", serving.port), timeout=5) as again:
        again.sendall(b"pong")
        assert again.recv(4) == b"pong"
    assert not toxiproxy.get_proxy(down.name).enabled, "the cut enabled a proxy a fault disabled"
