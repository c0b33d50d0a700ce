"""The GPU tier: the suite's scenarios on nccl, one CUDA device per rank, the same oracle.

Every ``gpu`` test skips, saying why, where CUDA or NCCL is missing (``tox -e gpu`` then exits
0 and prints the reason); a trajectory that needs more ranks than there are visible devices
skips with "needs N CUDA devices, M visible", since NCCL refuses two ranks on one device.
On one device: a G=1 save and restore, and a G=1 launch against an unreachable explicit store
(a single rank takes part in no aggregation round, so it must not notice). With two or more:
resizes, and the checkpoint round under faults (a stalled peer, an unreachable store).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from zephon_chaos.launch import GroupResult, LaunchSpec
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import RankRecord, RecordWriter, read_phase, read_rank
from zephon_chaos.workload.spec import (
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    WorkloadSpec,
)

TRAJECTORIES = [(1, 1), (2, 2), (2, 1), (1, 2), (4, 2)]
STORE_TIMEOUT_S = 2.0


def save_and_restore(world_sizes: tuple[int, int], **pipeline: object) -> Scenario:
    first, second = world_sizes
    return Scenario(
        data=DataSpec(),
        pipeline=PipelineSpec(canonical_replicas=4, **pipeline),  # type: ignore[arg-type]
        launches=(
            Launch(world_size=first, steps=2, checkpoints=(CheckpointAt(2),)),
            Launch(world_size=second, steps=2),
        ),
        backend="nccl",
        name=f"nccl-{first}-{second}",
    )


def assert_batches_reached_the_gpu(records: list[RankRecord]) -> None:
    """Each batch has a ``device`` record on its rank's GPU whose sum matches the sample ids."""
    for rec in records:
        moved = [ev for ev in rec.events if ev.get("kind") == "device"]
        assert len(moved) == len(rec.batches), (
            f"rank {rec.rank}: {len(rec.batches)} batches, {len(moved)} moved to a GPU"
        )
        for ev, batch in zip(moved, rec.batches, strict=True):
            assert ev["device"] == f"cuda:{rec.rank}", ev  # one node: local rank = rank
            assert ev["lane"] == batch.lane
            assert ev["checksum"] == float(sum(sum(sid) for sid in batch.ids))


@pytest.fixture
def refused_endpoint() -> Iterator[str]:
    """host:port of a bound socket that never listens: every connection is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def explicit_store_at(
    launcher: Callable[[LaunchSpec], GroupResult], uri: str
) -> Callable[[LaunchSpec], GroupResult]:
    """Wrap a runner's launcher so that launches on an explicit store dial ``uri`` instead."""

    def launch(spec: LaunchSpec) -> GroupResult:
        spec_file = Path(spec.args[0])
        workload = WorkloadSpec.read(spec_file)
        if workload.pipeline.aggregation == "store_explicit":
            replace(workload, store_uri=uri).write(spec_file)
        return launcher(spec)

    return launch


@pytest.mark.gpu
@pytest.mark.parametrize("world_sizes", TRAJECTORIES, ids=lambda t: "G{}-{}".format(*t))
def test_save_and_restore_on_nccl(
    resume_check, gpu_world: Callable[[tuple[int, ...]], None], world_sizes: tuple[int, int]
) -> None:
    gpu_world(world_sizes)
    outcome = resume_check(save_and_restore(world_sizes))
    assert outcome.ok, outcome.report()
    for run in ([outcome.reference] if outcome.reference else []) + outcome.phases:
        assert_batches_reached_the_gpu(run.records)


@pytest.mark.gpu
@pytest.mark.chaos
def test_a_single_nccl_rank_never_dials_an_unreachable_store(
    resume_check, cuda_devices: int, refused_endpoint: str
) -> None:
    """G=1 takes part in no aggregation round (Zephon rule Z23): save and restore stay exact."""
    resume_check.runner.launcher = explicit_store_at(
        resume_check.runner.launcher, f"torch://{refused_endpoint}"
    )
    scenario = save_and_restore(
        (1, 1), aggregation="store_explicit", aggregate_timeout_s=STORE_TIMEOUT_S
    )
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    specs = [WorkloadSpec.read(Path(run.spec.out_dir) / "spec.json") for run in outcome.phases]
    dialed = {spec.store_uri for spec in specs}
    assert dialed == {f"torch://{refused_endpoint}"}
    for run in outcome.phases:
        assert_batches_reached_the_gpu(run.records)


ROUND_FAULTS = {
    # case: (pipeline fields, rank faults, text the failure must carry)
    "stalled-peer": (
        {"aggregation": "store"},
        (RankFault(rank=1, at_step=2, action="sigstop"),),
        "Timed out",
    ),
    "unreachable-store": ({"aggregation": "store_explicit"}, (), "Can't reach the checkpoint"),
}


@pytest.mark.gpu
@pytest.mark.chaos
@pytest.mark.parametrize("case", sorted(ROUND_FAULTS))
def test_checkpoint_round_faults_on_nccl_fail_in_words(
    torchrun_group,
    gpu_world: Callable[[tuple[int, ...]], None],
    chaos_tmp_root: Path,
    refused_endpoint: str,
    case: str,
) -> None:
    """Two ranks: a stalled peer or an unreachable store fails the run with the cause, no hang."""
    gpu_world((2,))
    fields, faults, evidence = ROUND_FAULTS[case]
    out = chaos_tmp_root / case
    out.mkdir()
    spec = WorkloadSpec(
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregate_timeout_s=STORE_TIMEOUT_S, **fields  # type: ignore[arg-type]
        ),
        steps=3,
        checkpoints=(CheckpointAt(2),),
        out_dir=str(out),
        store_uri=f"torch://{refused_endpoint}",
        faults=faults,
        backend="nccl",
    )
    result = torchrun_group(
        "zephon_chaos.rank", module=True, args=[str(spec.write(out / "spec.json"))], nproc=2
    )
    assert not result.ok and not result.timed_out, result.summary()
    records = read_phase(out, 2)
    errors = [ev.error or "" for rec in records for ev in rec.checkpoints if not ev.ok]
    first = result.first_failure.error if result.first_failure else ""
    assert any(evidence in text for text in [*errors, first or ""]), result.report()
    if faults:
        fired = [ev for ev in records[1].events if ev.get("kind") == "fault"]
        assert fired and fired[0]["action"] == "sigstop", "the scheduled stall never fired"


def test_batches_move_to_the_device_with_their_ids(tmp_path: Path) -> None:
    """The move itself, on the CPU device: ids become a tensor whose sum is recorded."""
    torch = pytest.importorskip("torch")
    from zephon_chaos.rank.main import _to_device
    from zephon_chaos.workload.data import build_pipeline

    pipe = build_pipeline(
        DataSpec(),
        PipelineSpec(canonical_replicas=2),
        world_size=1,
        rank=0,
        aggregate_dir=str(tmp_path / "aggregate"),  # not Zephon's default temp directory
    )
    batches = iter(pipe)
    out = RecordWriter(tmp_path, 0)
    try:
        taken = [next(batches) for _ in range(3)]
        for batch in taken:
            _to_device(batch, torch.device("cpu"), out)
    finally:
        out.close()
        batches.close()  # type: ignore[attr-defined]
    moved = [ev for ev in read_rank(tmp_path, 0).events if ev["kind"] == "device"]
    assert [ev["lane"] for ev in moved] == [int(b.lane_ids[0]) for b in taken]
    assert [ev["checksum"] for ev in moved] == [
        float(sum(sum(int(x) for x in sid) for sid in b.ids)) for b in taken
    ]
    assert {ev["device"] for ev in moved} == {"cpu"}


def test_the_backend_travels_from_the_scenario_to_every_launch(tmp_path: Path) -> None:
    from zephon_chaos.runner import workload_spec
    from zephon_chaos.scenario import ScenarioError

    scenario = Scenario.from_json(save_and_restore((1, 1)).to_json())
    assert scenario.backend == "nccl" and "backend nccl" in scenario.summary()
    assert {workload_spec(scenario, i, tmp_path, tmp_path).backend for i in (0, 1)} == {"nccl"}
    with pytest.raises(ScenarioError, match=r"scenario\.backend: must be gloo or nccl"):
        replace(scenario, backend="mpi").validate()
