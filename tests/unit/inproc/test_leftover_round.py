"""A relaunch into the store namespace of a launch that died mid-round meets the round the dead
leader left open (announced, its failure notice lost with its link), as a real job's does:
the harness reads it and changes nothing (``runner.relaunches``), unless the scenario's
deployment names the operator step that clears it (``Deployment.operator``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.deployment import Deployment
from zephon_chaos.explore import known
from zephon_chaos.faults.leftover_round import LeftoverRound
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.spec import CheckpointAt, DataSpec, PipelineSpec, SourceSpec


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[InprocScenarioRunner]:
    with inproc_runner(tmp_path / "inproc") as r:
        yield r
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-s")]


def _dead_round(out_dir: str) -> str:
    """The round id the faulted leader opened: its interposer saw its shard key."""
    events = (Path(out_dir) / "interposer" / "rank0.jsonl").read_text().splitlines()
    shard = next(e for e in map(json.loads, events) if e.get("phase") == "shard")
    return str(shard["key"]).split("/")[2]


def _relaunch_after_a_dead_round(deployment: Deployment) -> Scenario:
    """Launch 1 restores launch 0's checkpoint; its leader's link is reset before its
    participants write, so no failure notice lands. Launch 2 restores the same checkpoint
    with the same run id: namespace ``zephon/zc-run-1``, where launch 1's round is open."""
    reset = ProxyFault(0, "reset_peer", {"timeout": 0}, at="participants")
    return Scenario(
        data=DataSpec(sources=(SourceSpec("a", (20, 20)),), chunk_size=4),
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregation="store_explicit", aggregate_timeout_s=2.0
        ),
        launches=(
            Launch(2, 2, (CheckpointAt(1),)),
            Launch(2, 3, (CheckpointAt(1),), proxy_faults=(reset,)),
            Launch(2, 2, (CheckpointAt(1),)),
        ),
        deployment=deployment,
        name="relaunch-after-reset",
    ).validate()


def test_a_relaunch_from_the_same_checkpoint_meets_the_dead_launchs_round_as_left(
    runner: InprocScenarioRunner,
) -> None:
    """Nobody clears it (the downstream's deployment): launch 2 meets the dead round, the
    harness changes nothing, and whatever it costs is explained by what Zephon documents."""
    outcome = runner.run(_relaunch_after_a_dead_round(Deployment()))
    first, dead, again = outcome.phases
    assert not dead.result.ok, outcome.report()
    assert again.spec.restore_from == dead.spec.restore_from, "not the same namespace"
    assert first.met_round is None
    assert again.met_round == LeftoverRound("zephon/zc-run-1", _dead_round(dead.spec.out_dir))
    assert not again.cleared_round
    assert not outcome.harness_problems, outcome.report()
    assert known.judged_ok(outcome), outcome.report()


def test_the_operator_step_clears_the_dead_round_and_the_relaunch_completes(
    runner: InprocScenarioRunner,
) -> None:
    outcome = runner.run(_relaunch_after_a_dead_round(Deployment(operator="clear_failed_rounds")))
    _, dead, again = outcome.phases
    assert again.met_round == LeftoverRound("zephon/zc-run-1", _dead_round(dead.spec.out_dir))
    assert again.cleared_round
    assert again.result.ok, outcome.report()
    assert known.judged_ok(outcome), outcome.report()


@pytest.mark.parametrize(
    "deployment",
    [Deployment(run_id="per_launch"), Deployment(hosted_store="launch")],
    ids=["a-run-id-per-launch", "a-store-per-launch"],
)
def test_a_deployment_that_scopes_each_launch_meets_no_dead_round(
    runner: InprocScenarioRunner, deployment: Deployment
) -> None:
    """The mitigations a recipe can deploy: the relaunch's rounds live where no dead launch's
    do, so it meets none and completes."""
    outcome = runner.run(_relaunch_after_a_dead_round(deployment))
    _, dead, again = outcome.phases
    assert not dead.result.ok, outcome.report()
    assert again.met_round is None
    assert again.result.ok, outcome.report()
    assert known.judged_ok(outcome), outcome.report()
