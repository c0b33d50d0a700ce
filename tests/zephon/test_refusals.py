"""What Zephon must refuse on a real group, and how the report shows it.

A changed C at restore, more ranks than lanes, both aggregation targets, and a damaged
checkpoint file: each fails the group with the rank's own error in the report, never a hang.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, WorkloadSpec

pytestmark = pytest.mark.cpu

REFUSED_TRANSITIONS = {
    "changed C at restore": (
        (Launch(2, 2, (CheckpointAt(1),)), Launch(2, 2, canonical_replicas=4)),
        "canonical_replicas changed",
    ),
    "G > C at restore": (
        (Launch(2, 2, (CheckpointAt(1),)), Launch(3, 2)),
        "canonical_replicas (2) must be >= dp_degree (3)",
    ),
    "G > C from the start": ((Launch(3, 2),), "canonical_replicas (2) must be >= dp_degree (3)"),
}


@pytest.mark.parametrize("name", sorted(REFUSED_TRANSITIONS))
def test_a_refused_transition_fails_with_zephons_error(resume_check, name: str) -> None:
    phases, error = REFUSED_TRANSITIONS[name]
    last = replace(phases[-1], expect_failure=True, expect_error=error)
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2), launches=(*phases[:-1], last), name=name
    )
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    failed = outcome.phases[-1].result
    assert not failed.ok and not failed.timed_out
    assert error in failed.report()


def _launch_workload(torchrun_group, spec: WorkloadSpec, nproc: int = 2):
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return torchrun_group(
        "zephon_chaos.rank",
        module=True,
        args=[str(spec.write(out / "spec.json"))],
        nproc=nproc,
        deadline_s=90,
    )


def test_both_aggregation_targets_fail_the_group_with_a_value_error(torchrun_group, tmp_path):
    spec = WorkloadSpec(
        steps=1,
        checkpoints=(CheckpointAt(1),),
        out_dir=str(tmp_path / "run"),
        aggregate_dir=str(tmp_path / "aggregate"),
    )
    result = _launch_workload(torchrun_group, spec)
    assert not result.ok and not result.timed_out
    assert result.first_failure is not None
    assert result.first_failure.error is not None
    assert result.first_failure.error.startswith("ValueError: Set at most one of")
    assert "aggregate_dir" in result.report() and "aggregate_store" in result.report()


DAMAGE = {
    "truncated": lambda data: data[: len(data) // 3],
    "garbage": lambda data: b"\x00not a checkpoint\xff" * 8,
    "empty": lambda data: b"",
}


# tests/unit/workload/test_persist.py reads every kind of damage in every format; here one
# kind shows the error reaches the group's report, the others run with `slow`.
@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=() if k == "truncated" else pytest.mark.slow) for k in DAMAGE]
)
def test_a_damaged_checkpoint_file_is_named_in_the_error(
    torchrun_group, tmp_path: Path, kind: str
) -> None:
    saved = WorkloadSpec(steps=1, checkpoints=(CheckpointAt(1),), out_dir=str(tmp_path / "p0"))
    _launch_workload(torchrun_group, saved).raise_for_status()
    path = tmp_path / f"{kind}.pkl"
    path.write_bytes(DAMAGE[kind](saved.checkpoint_path(0).read_bytes()))
    spec = replace(saved, checkpoints=(), restore_from=str(path), out_dir=str(tmp_path / kind))
    result = _launch_workload(torchrun_group, spec)
    assert not result.ok and not result.timed_out
    error = result.first_failure.error if result.first_failure else ""
    assert error and error.startswith("CheckpointFileError"), result.report()
    assert str(path) in error and "restore from an earlier checkpoint" in error
