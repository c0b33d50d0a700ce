"""Process faults on real torchrun groups: signals to a rank, a killed agent, restarts.

A fault fires on a logical event: before a global step (the rank acts on itself), or when
the rank writes a key of a checkpoint round (the interposer). The harness then waits for the
next logical event (the rank stopped: state T in /proc; the leader published its outcome)
before it acts (SIGCONT). Each test proves its fault fired (the rank's own fault record, the
signal in the wait status, the agent's exit status) and judges what followed: the round's
verdict, the previous checkpoint intact on disk, and a relaunch from it (same or another
world size, torch:// or aggregate_dir) that keeps the global-batch identity.
"""

from __future__ import annotations

import signal
from dataclasses import replace
from typing import Any

import pytest

from zephon_chaos.launch.exitcodes import describe
from zephon_chaos.oracles import faults as oracle
from zephon_chaos.oracles.global_batches import PhaseRecords
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import read_phase
from zephon_chaos.workload.spec import CheckpointAt, PhaseTrigger, PipelineSpec, RankFault

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0
STATUS = {
    "sigkill": "killed by SIGKILL",
    "sigterm": "killed by SIGTERM",
    "exit": "exited 17",
}


def crash_cases() -> list[Any]:
    """(action, aggregation, world sizes before and after the relaunch)."""
    default = {("sigkill", "store", (2, 3)), ("kill_agent", "dir", (2, 2))}
    cases = [
        (action, aggregation, sizes)
        for action in ("sigkill", "sigterm", "kill_agent")
        for aggregation in ("store", "dir")
        for sizes in ((2, 3), (3, 2), (2, 2))
    ]
    return [
        pytest.param(
            action,
            aggregation,
            sizes,
            id=f"{action}-{aggregation}-{sizes[0]}to{sizes[1]}",
            marks=() if (action, aggregation, sizes) in default else (pytest.mark.slow,),
        )
        for action, aggregation, sizes in cases
    ]


@pytest.mark.parametrize(("action", "aggregation", "sizes"), crash_cases())
def test_a_crashed_group_relaunches_from_its_last_checkpoint(
    resume_check, torchrun_group, action: str, aggregation: str, sizes: tuple[int, int]
) -> None:
    """Rank 0 ends itself (or its agent) at step 2. The leader is past step 1's round, so
    every rank completed checkpoint 0 and rank 0 persisted it; a follower's step says nothing
    of the leader's progress (its fault could race the leader's wait for the last ack)."""
    first, then = sizes
    victim = 0
    scenario = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=6,
            aggregation=aggregation,  # type: ignore[arg-type]
            aggregate_timeout_s=TIMEOUT_S,
        ),
        launches=(
            Launch(first, 3, (CheckpointAt(1),), rank_faults=(RankFault(victim, 2, action),)),
            Launch(then, 2),
        ),
        name=f"{action}-{aggregation}",
    )
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    crashed = outcome.phases[0]
    fired = [e for e in crashed.records[victim].events if e.get("kind") == "fault"]
    assert [e["action"] for e in fired] == [action], "the fault never fired"
    result = crashed.result
    if action == "kill_agent":
        assert result.agent_returncodes == [-signal.SIGKILL], result.summary()
        assert describe(result.agent_returncodes[0]) == "killed by SIGKILL"
        assert all(r.killed_by_harness for r in result.ranks), "orphaned ranks outlived it"
        # No agent saw the orphans end: the harness's own SIGKILL is their status.
        assert all(r.status.startswith("killed by SIGKILL") for r in result.ranks), result.summary()
        assert "it killed its own agent" in result.rank(victim).status, result.summary()
    else:
        status = result.rank(victim).status
        assert STATUS[action] in status, result.summary()
        # The rank's note tells its own signal from the OOM killer's.
        assert f"sent by the rank itself: scheduled fault {action!r}" in status, status
        assert "OOM" not in status and not result.rank(victim).unexplained_sigkill, status
    spec = crashed.spec
    assert oracle.previous_intact(crashed.records, spec.checkpoint_path(0), 0, "pickle") == []
    assert outcome.resumes[0].to_world == then and outcome.verdict is not None
    assert outcome.verdict.ok and outcome.verdict.contract == "identical global batches"
    assert not [p for g in torchrun_group.groups for p in g.registry.survivors()]


@pytest.mark.parametrize(
    ("aggregation", "world"),
    [
        pytest.param("store", 2, id="store-2ranks"),
        pytest.param("dir", 2, id="dir-2ranks", marks=pytest.mark.slow),
        pytest.param("store", 3, id="store-3ranks", marks=pytest.mark.slow),
        pytest.param("dir", 3, id="dir-3ranks", marks=pytest.mark.slow),
    ],
)
def test_a_rank_stopped_and_continued_within_the_budget_costs_nothing(
    chaos, aggregation: str, world: int
) -> None:
    """SIGSTOP (the rank, at step 2) → the harness sees state T → SIGCONT → same checkpoint."""
    victim = world - 1
    spec = chaos.spec(
        f"stop-{aggregation}",
        nproc=world,
        aggregation=aggregation,
        timeout_s=20.0,
        faults=(RankFault(victim, 2, "sigstop"),),
    )
    run = chaos.launch(spec, nproc=world, proxies=False, control=False)
    stop = run.wait_stopped(victim)
    assert stop.state == "T"
    run.cont(victim)
    result = run.wait()
    assert result.ok, result.report()
    assert not run.survivors()
    fired = [e for e in run.records()[victim].events if e.get("kind") == "fault"]
    assert [e["action"] for e in fired] == ["sigstop"]
    unfaulted = chaos.unfaulted(spec, world)
    verdict = run.judge(1, unfaulted=unfaulted)
    assert verdict.outcome == oracle.COMPLETED, verdict.describe()


@pytest.mark.parametrize(
    ("retry", "attempts", "outcome"),
    [
        pytest.param("lockstep", 2, oracle.COMPLETED, id="lockstep"),
        pytest.param("none", 1, oracle.FAILED, id="no-retry", marks=pytest.mark.slow),
    ],
)
def test_a_rank_stopped_in_a_round_past_the_budget(
    chaos, retry: str, attempts: int, outcome: str
) -> None:
    """Rank 1 stops itself before its second shard; the leader times out and publishes its
    failure (the event the harness waits for); then SIGCONT. Lockstep retries the round."""
    spec = chaos.spec(
        f"stop-round-{retry}",
        timeout_s=TIMEOUT_S,
        triggers=(
            PhaseTrigger(1, "shard", "sigstop", occurrence=2),
            PhaseTrigger(0, "outcome", "event", occurrence=2, when="after"),
        ),
        retry=retry,
        retry_attempts=attempts,
    )
    run = chaos.launch(spec)
    assert run.expect(rank=1, phase="shard").event["action"] == "sigstop"
    run.wait_stopped(1)
    published = run.expect(rank=0, phase="outcome").event
    assert published["outcome"] == "failure", published
    run.cont(1)
    result = run.wait()
    assert not run.survivors()
    unfaulted = chaos.unfaulted(spec) if outcome == oracle.COMPLETED else None
    verdict = run.judge(
        1, unfaulted=unfaulted, causes={0: "Missing ranks=[1]", 1: "failed on leader"}
    )
    assert verdict.outcome == outcome, f"{verdict.describe()}\n{result.summary()}"
    assert run.previous_intact(0) == []
    if retry == "lockstep":
        attempts_seen = [
            e["ok"] for e in run.records()[0].events if e.get("kind") == "checkpoint_attempt"
        ]
        assert attempts_seen == [True, False, True], attempts_seen


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("action", ["sigkill", "kill_agent"])
def test_a_rank_killed_in_a_round_fails_it_and_leaves_the_last_checkpoint(
    chaos, action: str, world: int
) -> None:
    victim = world - 1
    spec = chaos.spec(
        f"kill-round-{action}",
        nproc=world,
        timeout_s=TIMEOUT_S,
        triggers=(PhaseTrigger(victim, "shard", action, occurrence=2),),
    )
    run = chaos.launch(spec, nproc=world)
    assert run.expect(rank=victim, phase="shard").event["action"] == action
    result = run.wait()
    assert not run.survivors()
    if action == "kill_agent":
        assert result.agent_returncodes == [-signal.SIGKILL], result.summary()
        verdict = run.judge(1)
    else:
        verdict = run.judge(1, faulted={victim: "killed by SIGKILL"})
    assert verdict.outcome == oracle.FAILED, f"{verdict.describe()}\n{result.summary()}"
    assert run.previous_intact(0) == []


@pytest.mark.parametrize(
    ("aggregation", "world"),
    [
        pytest.param("store", 2, id="store-2ranks"),
        pytest.param("dir", 2, id="dir-2ranks", marks=pytest.mark.slow),
        pytest.param("store", 3, id="store-3ranks", marks=pytest.mark.slow),
    ],
)
def test_torchrun_restarts_the_group_from_its_last_checkpoint(
    chaos, aggregation: str, world: int
) -> None:
    """--max-restarts 1: rank 0 exits at step 2 of attempt 0 (after persisting checkpoint 0);
    torchrun restarts every worker and attempt 1 resumes checkpoint 0."""
    victim = 0
    spec = chaos.spec(
        f"restart-{aggregation}",
        nproc=world,
        aggregation=aggregation,
        timeout_s=TIMEOUT_S,
        faults=(RankFault(victim, 2, "exit", restart=0),),
        resume_on_restart=True,
    )
    run = chaos.launch(spec, nproc=world, max_restarts=1, proxies=False, control=False)
    result = run.wait()
    assert result.ok, result.report()
    assert not run.survivors()
    restarts = {str(rec.get("restart")) for rec in run.group.worker_records().values()}
    assert {"0", "1"} <= restarts, f"torchrun did not restart the workers: {restarts}"
    attempt0 = run.records()
    fired = [e for e in attempt0[victim].events if e.get("kind") == "fault"]
    assert [e["action"] for e in fired] == ["exit"]
    assert run.previous_intact(0) == []
    attempt1 = read_phase(run.out_dir / "restart1", world)
    assert all(rec.restored for rec in attempt1), "attempt 1 did not restore checkpoint 0"
    reference = chaos.unfaulted(replace(spec, steps=4, checkpoints=()), world).records
    verdict = oracle.stitched_identity(
        reference,
        [PhaseRecords(world, attempt0, 1), PhaseRecords(world, attempt1, None)],
        batches_per_lane=1 + spec.steps,
    )
    assert verdict.ok, verdict.describe()
