"""Faults of the harness-hosted store (aggregation ``store_explicit``), and torchrun restarts.

The store runs in a process of its own and outlives the launches. At a round point (the
interposer of the rank that writes it waits while the harness acts) it is restarted empty,
killed, or stopped and continued; each test proves the fault acted (the store process's own
state changes, the interposer's event) and judges what followed: the faulted round completes
or fails on every rank within the bound, and the next launch, against the same store (a
killed one restarted empty), resumes from the last surviving checkpoint with identical
global batches. A stall past the bound is the known stalled-store defect, never a new
violation. Restarts: torchrun ``--max-restarts 1`` after a rank fault, attempt 1 resumes the
latest checkpoint attempt 0 persisted, and the batches of both attempts stitch.
"""

from __future__ import annotations

import pytest

from zephon_chaos.deployment import Deployment
from zephon_chaos.explore import known
from zephon_chaos.faults.interposer import read_events
from zephon_chaos.faults.restart import restored_from
from zephon_chaos.launch.store_process import StoreAction
from zephon_chaos.nemeses.hosted_store import StoreFaultLaunch, writer_of
from zephon_chaos.oracles.faults import COMPLETED, FAILED
from zephon_chaos.scenario import Launch, Scenario, StoreFault
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankFault

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0
CPS = (CheckpointAt(1), CheckpointAt(2))
ACTED = {
    "restart": [StoreAction.KILLED, StoreAction.RESTARTED],
    "kill": [StoreAction.KILLED],
    "sigstop": [StoreAction.STOPPED, StoreAction.CONTINUED],
}


def faulted_scenario(fault: StoreFault, *phases: Launch, runner: str = "inline") -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2,
            runner=runner,  # type: ignore[arg-type]
            aggregation="store_explicit",
            aggregate_timeout_s=TIMEOUT_S,
        ),
        launches=(Launch(2, 3, CPS, store_faults=(fault,)), *(phases or (Launch(2, 2),))),
        name=f"hosted-{fault.action}",
    ).validate()


@pytest.mark.parametrize(
    ("fault", "runner"),
    [
        pytest.param(StoreFault("restart", "shard#2"), "inline", id="restart-at-shard2"),
        pytest.param(
            StoreFault("kill", "announce#2"),
            "inline",
            id="kill-at-announce2",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            StoreFault("sigstop", "shard#1", 1.0),
            "inline",
            id="stop-1s-at-shard1",
            marks=pytest.mark.slow,
        ),
        # The downstream's runner: its worker processes run stage ops, the rank the round.
        pytest.param(
            StoreFault("restart", "shard#2"),
            "process",
            id="restart-at-shard2-process-runner",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_hosted_store_fault_ends_its_round_and_the_next_launch_resumes(
    resume_check, fault: StoreFault, runner: str
) -> None:
    outcome = resume_check(faulted_scenario(fault, runner=runner))
    run, after = outcome.phases
    stored = run.fault
    assert isinstance(stored, StoreFaultLaunch), outcome.report()
    assert [e.action for e in stored.acted] == ACTED[fault.action], stored.watch_error
    point, n = stored.point
    events = read_events(run.spec.out_dir, writer_of(point))
    assert any(e["kind"] == "held" and (e["phase"], e["n"]) == (point, n) for e in events), (
        "the interposer never waited at the point"
    )
    assert stored.verdict is not None and stored.verdict.outcome in (COMPLETED, FAILED)
    if stored.verdict.outcome == FAILED:
        surviving = run.restore_index
        assert surviving == stored.index - 1 if stored.index else surviving is None
        expected = str(run.spec.checkpoint_path(surviving)) if surviving is not None else None
        assert after.spec.restore_from == expected, "the relaunch did not resume the survivor"
    if fault.action == "kill":
        assert stored.store.history[-1].action is StoreAction.RESTARTED, "no store for launch 2"
    assert after.result.ok and outcome.ok, outcome.report()


@pytest.mark.slow
def test_a_stall_past_the_bound_is_the_known_defect_and_a_relaunch_on_the_same_namespace_resumes(
    resume_check,
) -> None:
    """Launch 1 restores launch 0's checkpoint; its store stalls 12 s (bound 9 s) in its first
    round, which fails; launch 2 restores the same checkpoint with the same run_id, so its
    rounds use launch 1's namespace (``zephon/{run_id}-{reload_count}``) in the store that
    kept launch 1's keys."""
    stall = StoreFault("sigstop", "shard#1", 12.0)
    scenario = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregation="store_explicit", aggregate_timeout_s=TIMEOUT_S
        ),
        launches=(
            Launch(2, 2, (CheckpointAt(1),)),
            Launch(2, 3, CPS, store_faults=(stall,)),
            Launch(2, 2),
        ),
        deployment=Deployment(run_id="fixed"),
        name="hosted-stall-same-namespace",
    ).validate()
    outcome = resume_check(scenario)
    _, stalled, again = outcome.phases
    assert [e.action for e in stalled.fault.acted] == ACTED["sigstop"]
    assert stalled.fault.stalled_s() >= stall.stall_s
    assert again.spec.restore_from == stalled.spec.restore_from, "not the same namespace"
    assert known.unexplained(outcome) == [], outcome.report()
    if outcome.problems:
        assert known.STALLED_HOSTED_STORE in known.explaining(outcome)
    assert known.judged_ok(outcome), outcome.report()


@pytest.mark.slow
def test_a_store_killed_at_an_acknowledgement_fails_the_round_within_the_known_defects_reach(
    resume_check,
) -> None:
    """G 4: the store dies as rank 1 acknowledges round 1; the leader may have read ranks 2
    and 3's acknowledgements, whose clean-up then meets the dead store once each
    (``dead-store-ack-cleanup``). Whatever it read, nothing else is wrong, and the next
    launch, on an empty store, resumes the last surviving checkpoint."""
    kill = StoreFault("kill", "ack#1")
    scenario = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=4, aggregation="store_explicit", aggregate_timeout_s=TIMEOUT_S
        ),
        launches=(Launch(4, 3, CPS, store_faults=(kill,)), Launch(2, 2)),
        name="hosted-kill-at-ack",
    ).validate()
    outcome = resume_check(scenario)
    killed = outcome.phases[0].fault
    assert [e.action for e in killed.acted] == ACTED["kill"], killed.watch_error
    assert known.unexplained(outcome) == [], outcome.report()
    if outcome.problems:
        assert known.DEAD_STORE_ACK_CLEANUP in known.explaining(outcome), outcome.report()
    assert known.judged_ok(outcome), outcome.report()


@pytest.mark.parametrize(
    "action",
    ["sigkill", pytest.param("raise", marks=pytest.mark.slow)],
)
def test_torchrun_restarts_a_scenario_launch_from_its_latest_checkpoint(
    resume_check, action: str
) -> None:
    """--max-restarts 1: rank 1 dies at step 2 of attempt 0 (checkpoint 0 persisted at step 1);
    attempt 1 resumes it, then the next launch resumes attempt 1's last checkpoint."""
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S * 5),
        launches=(
            Launch(
                2,
                3,
                (CheckpointAt(1), CheckpointAt(3)),
                rank_faults=(RankFault(1, 2, action, restart=0),),
                max_restarts=1,
            ),
            Launch(2, 2),
        ),
        name=f"restart-{action}",
    ).validate()
    outcome = resume_check(scenario)
    restarted, after = outcome.phases
    assert restarted.spec.out_dir.endswith("restart1"), outcome.report()
    restored = restored_from(restarted.spec.out_dir, 2)
    assert restored == {str(restarted.spec.restore_from)}
    assert restarted.spec.restore_from.endswith("phase0/ckpt-0.pkl"), "not attempt 0's checkpoint"
    assert after.spec.restore_from == str(restarted.spec.checkpoint_path(1))
    assert outcome.ok, outcome.report()
