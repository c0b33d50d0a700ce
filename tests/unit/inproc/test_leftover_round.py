"""A relaunch into the store namespace of a launch that died mid-round: the harness closes
the round the dead leader left open (announced, its failure notice lost with its link), as
Zephon leaves failed-round artifacts to the operator (``launch.leftover_round``). Without it
a relaunched follower that called ``checkpoint()`` before its leader joined the dead round,
and the relaunch's round failed: a false finding with no fault in that launch."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.explore import known
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.launch.leftover_round import LeftoverRound
from zephon_chaos.scenario import Phase, ProxyFault, Scenario
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


def test_a_relaunch_from_the_same_checkpoint_finds_the_dead_launchs_round_closed(
    runner: InprocScenarioRunner,
) -> None:
    """Launch 1 restores launch 0's checkpoint; its leader's link is reset before its
    participants write, so no failure notice lands. Launch 2 restores the same checkpoint
    with the same run id (namespace ``zephon/zc-run-1``): the harness closes that round
    first, and launch 2's rounds complete."""
    reset = ProxyFault(0, "reset_peer", {"timeout": 0}, at="participants")
    scenario = Scenario(
        data=DataSpec(sources=(SourceSpec("a", (20, 20)),), chunk_size=4),
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregation="store_explicit", aggregate_timeout_s=2.0
        ),
        phases=(
            Phase(2, 2, (CheckpointAt(1),)),
            Phase(2, 3, (CheckpointAt(1),), proxy_faults=(reset,)),
            Phase(2, 2, (CheckpointAt(1),)),
        ),
        run_id_policy="fixed",
        name="relaunch-after-reset",
    ).validate()
    outcome = runner.run(scenario)
    first, dead, again = outcome.phases
    assert not dead.result.ok, outcome.report()
    assert again.spec.restore_from == dead.spec.restore_from, "not the same namespace"
    assert first.leftover_round is None
    assert dead.leftover_round is None, "launch 0's rounds all completed"
    assert again.leftover_round == LeftoverRound("zephon/zc-run-1", _dead_round(dead.spec.out_dir))
    assert again.result.ok, outcome.report()
    assert known.judged_ok(outcome), outcome.report()
