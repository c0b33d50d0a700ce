"""The recipe contract as a script meets it: the environment read, faults parsed, records kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zephon_chaos.fixtures.recipe_run import RecipeRunError, RecipeRunner
from zephon_chaos.recipe import (
    ENV_CKPT_DIR,
    ENV_RECORDS_DIR,
    Fault,
    RecipeContractError,
    RecipeRun,
    complete_checkpoints,
    parse_faults,
)
from zephon_chaos.workload.records import read_rank


def contract_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        ENV_RECORDS_DIR: str(tmp_path / "records"),
        ENV_CKPT_DIR: str(tmp_path / "ckpt"),
        "RANK": "1",
        "WORLD_SIZE": "2",
        "ZEPHON_CANONICAL_REPLICAS": "4",
        "ZEPHON_CHAOS_STEPS": "6",
        "ZEPHON_CHAOS_CHECKPOINT_EVERY": "2",
        **extra,
    }


def test_a_run_reads_its_shape_and_schedule(tmp_path: Path) -> None:
    run = RecipeRun.from_env(contract_env(tmp_path, ZEPHON_CHAOS_FAULTS="1:3:sigkill,*:5:preempt"))
    assert (run.rank, run.world_size, run.canonical_replicas) == (1, 2, 4)
    assert run.lanes == [2, 3] and run.microbatches == 2 and run.restore_from is None
    assert [run.should_checkpoint(s) for s in range(4)] == [False, True, False, True]
    assert run.checkpoint_dir(1).name == "step-000002"
    assert run.faults == (Fault(1, 3, "sigkill"), Fault(None, 5, "preempt"))
    assert run.step_begins(0) and not run.step_begins(5)  # preempted before step 5
    run.end()
    rec = read_rank(tmp_path / "records", 1)
    assert rec.world_size == 2 and rec.lanes == [2, 3] and rec.ended
    assert [ev["action"] for ev in rec.events if ev["kind"] == "fault"] == ["preempt"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({ENV_RECORDS_DIR: ""}, "ZEPHON_CHAOS_RECORDS_DIR is not set: launch the recipe through"),
        ({"ZEPHON_CHAOS_STEPS": "six"}, "ZEPHON_CHAOS_STEPS='six' is not an integer"),
        ({"ZEPHON_CANONICAL_REPLICAS": "3"}, "=3 is not a multiple of WORLD_SIZE=2"),
        ({"ZEPHON_CHAOS_FAULTS": "1:3:melt"}, "'1:3:melt' is not rank:step:action"),
        ({"ZEPHON_CHAOS_FAULTS": "one:3:exit"}, "rank and step must be integers"),
    ],
    ids=["records-unset", "steps", "c-not-multiple", "action", "rank"],
)
def test_a_bad_environment_names_the_variable(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(RecipeContractError, match=re.escape(message)):
        RecipeRun.from_env(contract_env(tmp_path, **env))


def test_only_directories_holding_the_loader_state_are_complete(tmp_path: Path) -> None:
    run = RecipeRun.from_env(contract_env(tmp_path, RANK="0"))
    run.save_loader_state(1, {"progress": {0: 1}})
    run.checkpoint_dir(3).mkdir(parents=True)  # the model was written, the loader state not
    assert complete_checkpoints(tmp_path / "ckpt") == {2: run.checkpoint_dir(1)}
    resumed = RecipeRun.from_env(
        contract_env(tmp_path, RANK="0", ZEPHON_CHAOS_RESTORE=str(run.checkpoint_dir(1)))
    )
    assert resumed.load_loader_state() == (2, {"progress": {0: 1}})
    broken = RecipeRun.from_env(
        contract_env(tmp_path, RANK="0", ZEPHON_CHAOS_RESTORE=str(run.checkpoint_dir(3)))
    )
    with pytest.raises(RecipeContractError, match="not a complete checkpoint"):
        broken.load_loader_state()
    for r in (run, resumed, broken):
        r.end()


def test_faults_round_trip_through_their_text() -> None:
    faults = (Fault(0, 2, "raise"), Fault(None, 4, "preempt"))
    assert parse_faults(",".join(f.encode() for f in faults)) == faults
    assert parse_faults("") == ()


BAD_CALLS = {
    "g-not-dividing-c": ({"world_sizes": [2, 3], "canonical_replicas": 4}, "must divide"),
    "unknown-fault": ({"fault": "melt"}, "fault must be one of sigkill, sigterm"),
    "no-checkpoint-yet": ({"interrupt_at": [1]}, "interrupt_at[0]=1 must lie after a checkpoint"),
    "fault-rank": ({"fault_rank": 2}, "fault_rank=2 is not a rank of every interrupted phase"),
    "no-checkpoints": ({"checkpoint_every": 0}, "checkpoint_every must be at least 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_recipe_run_refuses_bad_arguments_before_launching(tmp_path: Path, case: str) -> None:
    kwargs, message = BAD_CALLS[case]
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('never launched')\n")
    runner = RecipeRunner(groups=None, root=tmp_path / "runs")  # type: ignore[arg-type]
    with pytest.raises(RecipeRunError, match=re.escape(message)):
        runner(script, **{"world_sizes": [2, 1], "canonical_replicas": 2, **kwargs})
    assert not (tmp_path / "runs").exists()
