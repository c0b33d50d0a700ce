"""Rank faults timed by a point of a checkpoint round, and link faults on the harness's store,
as scenarios on real torchrun groups.

A rank raises in its store call, exits, is killed, terminated, or stopped (then continued by
the harness) right before its n-th write of a round point, on the leader or on a follower.
Each test proves the fault fired (the rank's interposer event, fsynced before the action;
for a stop, the kernel's state T and the harness's SIGCONT), takes the fault oracle's verdict
on the faulted round (never a finding), and checks that the next launch resumed from the last
checkpoint that survived with the global batches intact.
"""

from __future__ import annotations

from typing import Any

import pytest

from zephon_chaos.faults.interposer import read_events
from zephon_chaos.nemeses.round_faults import DEATH_WORDS, RoundFaultLaunch
from zephon_chaos.oracles import faults as oracle
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankFault

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0
ENDED = (oracle.FAILED, oracle.SPLIT)
"""A rank that dies in a round: the round fails on the others, or (after the leader
published it) some returned it and the rest failed."""
OUTCOMES = {
    "raise": ENDED,
    "exit": ENDED,
    "sigkill": ENDED,
    "sigterm": ENDED,
    "sigstop": (oracle.COMPLETED, *ENDED),
}
POINTS = {  # point -> the ranks that write it (of 2): leader 0, follower 1
    "announce": (0,),
    "shard": (0, 1),
    "participants": (0, 1),
    "outcome": (0,),
    "ack": (1,),
}
DEFAULT_RUN = {("sigkill", "shard", 1), ("sigstop", "shard", 1), ("raise", "outcome", 0)}
PROCESS_RUNNER_RUN = {("sigkill", "shard", 1), ("raise", "announce", 0)}
"""Faults under ``runner: process`` (the downstream's runner: worker processes run stage ops
only, and the round runs in the rank process, through its own interposer). Slow: every launch
starts each rank's workers (30-120 s a scenario on 2 loaded cores, warm lane)."""


def round_cases(writers: dict[str, tuple[int, ...]] = POINTS) -> list[Any]:
    """Every action at every point on every rank that writes it (``writers``); the
    ``DEFAULT_RUN`` ones in the default lane, the rest slow."""
    return [
        pytest.param(
            action,
            point,
            rank,
            id=f"{action}-{point}-{'leader' if rank == 0 else 'follower'}",
            marks=() if (action, point, rank) in DEFAULT_RUN else (pytest.mark.slow,),
        )
        for action in OUTCOMES
        for point, ranks in writers.items()
        for rank in ranks
    ]


def process_runner_cases() -> list[Any]:
    """``PROCESS_RUNNER_RUN`` under ``runner: process`` (each launch starts worker processes)."""
    return [
        pytest.param(
            action,
            point,
            rank,
            "process",
            id=f"{action}-{point}-{'leader' if rank == 0 else 'follower'}-process-runner",
            marks=pytest.mark.slow,
        )
        for action, point, rank in sorted(PROCESS_RUNNER_RUN)
    ]


def inline(cases: list[Any]) -> list[Any]:
    """``cases`` under runner ``inline``, with their ids and marks."""
    return [pytest.param(*case.values, "inline", id=case.id, marks=case.marks) for case in cases]


def faulted_scenario(
    fault: RankFault, aggregation: str = "store", retry: str = "none", runner: str = "inline"
) -> Scenario:
    """Round 2 is faulted, so checkpoint 0 is persisted first and the relaunch restores it."""
    return Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2,
            runner=runner,  # type: ignore[arg-type]
            aggregation=aggregation,  # type: ignore[arg-type]
            aggregate_timeout_s=TIMEOUT_S,
        ),
        launches=(
            Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)), rank_faults=(fault,), retry=retry),  # type: ignore[arg-type]
            Launch(2, 2),
        ),
        name=f"{fault.action}-{fault.at}-r{fault.rank}",
    ).validate()


def fired(run: Any, fault: RankFault) -> list[dict[str, Any]]:
    point, _, n = fault.at.partition("#")
    return [
        e
        for e in read_events(run.spec.out_dir, fault.rank)
        if e["kind"] == "fired" and e["phase"] == point and e["n"] == int(n or 1)
    ]


@pytest.mark.parametrize(
    ("action", "point", "rank", "runner"), [*inline(round_cases()), *process_runner_cases()]
)
def test_a_rank_faulted_at_a_round_point_fails_the_round_and_the_relaunch_resumes(
    resume_check, action: str, point: str, rank: int, runner: str
) -> None:
    fault = RankFault(rank, 0, action, at=f"{point}#2")
    outcome = resume_check(faulted_scenario(fault, runner=runner))
    assert_round_fault_judged(outcome, fault)


def assert_round_fault_judged(outcome: Any, fault: RankFault) -> list[dict[str, Any]]:
    """The fault fired once, its round got an expected verdict, a killed rank died of it, a
    stopped one was continued, and the relaunch resumed; returns the ``fired`` events."""
    action, rank = fault.action, fault.rank
    assert outcome.ok, outcome.report()
    run = outcome.phases[0]
    launch = run.fault
    assert isinstance(launch, RoundFaultLaunch) and launch.verdict is not None
    events = fired(run, fault)
    assert [e["action"] for e in events] == [action], "the fault never fired"
    assert launch.verdict.outcome in OUTCOMES[action], launch.verdict.describe()
    if action in DEATH_WORDS:
        assert DEATH_WORDS[action] in run.result.rank(rank).status, run.result.summary()
    if action == "sigstop":
        assert launch.continued is not None, launch.watch_error
        assert launch.continued.stop.state in "Tt"
        assert launch.continued.stop.continued_at is not None
    assert run.restore_index is not None and run.restore_index >= 0
    assert outcome.resumes and outcome.resumes[0].phase == 1
    assert outcome.verdict is not None and outcome.verdict.ok
    return events


def test_a_stopped_leader_is_continued_once_its_followers_calls_ended(resume_check) -> None:
    """The leader stops before announcing round 2; its follower waits T for the announcement
    and fails its call, which it says on the control channel: the harness continues the
    leader then, not after the bound (3 T + 3 s)."""
    fault = RankFault(0, 0, "sigstop", at="announce#2")
    outcome = resume_check(faulted_scenario(fault))
    assert_round_fault_judged(outcome, fault)
    continued = outcome.phases[0].fault.continued
    assert continued.after == "calls ended", continued


def test_a_raise_in_a_round_is_retried_away_under_lockstep(resume_check) -> None:
    """The raising rank fails attempt 1 of checkpoint 1; every rank agrees to retry, and
    attempt 2 (the rank's third shard write: no fault) completes on all."""
    fault = RankFault(1, 0, "raise", at="shard#2")
    outcome = resume_check(faulted_scenario(fault, retry="lockstep"))
    assert outcome.ok, outcome.report()
    launch = outcome.phases[0].fault
    assert launch.verdict.outcome == oracle.COMPLETED, launch.verdict.describe()
    assert outcome.phases[0].result.ok and outcome.phases[0].restore_index == 1


@pytest.mark.slow
def test_a_follower_killed_at_its_shard_on_the_harness_store(resume_check) -> None:
    fault = RankFault(1, 0, "sigkill", at="shard#2")
    outcome = resume_check(faulted_scenario(fault, aggregation="store_explicit"))
    assert outcome.ok, outcome.report()
    assert outcome.phases[0].fault.verdict.outcome == oracle.FAILED
    assert outcome.phases[0].restore_index == 0


def test_a_link_fault_on_the_harness_hosted_store(resume_check) -> None:
    """store_explicit: each rank's client reaches the harness's store through its own proxy;
    rank 1's is cut before its second shard, the round fails, the relaunch resumes."""
    scenario = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2, aggregation="store_explicit", aggregate_timeout_s=TIMEOUT_S
        ),
        launches=(
            Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)),
                  proxy_faults=(ProxyFault(1, "down", at="shard#2"),)),
            Launch(2, 2),
        ),
        name="cut-explicit",
    ).validate()
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    run = outcome.phases[0]
    placed = [e for rec in run.records for e in rec.events if e["kind"] == "placement"]
    assert {p["upstream"] for p in placed} == {run.spec.store_uri.partition("://")[2]}
    assert run.fault.verdict.outcome == oracle.FAILED, run.fault.verdict.describe()
    assert run.fault.evidence and run.restore_index == 0
    assert outcome.verdict is not None and outcome.verdict.ok


@pytest.mark.slow
def test_a_stalled_link_is_the_known_defect_within_a_short_deadline(resume_check) -> None:
    """A timeout toxic on rank 1's link before its second shard, under lockstep retry: the
    others wait for it in the agreement, the launch ends at its short deadline, and the
    outcome is the known stalled-link defect, nothing else."""
    from zephon_chaos.explore.known import STALLED_STORE_LINK, explaining, unexplained
    from zephon_chaos.nemeses.scenario_proxy import stall_deadline_s

    stall = ProxyFault(1, "timeout", {"timeout": 0}, at="shard#2")
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S),
        launches=(
            Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)), proxy_faults=(stall,),
                  retry="lockstep"),
            Launch(2, 2),
        ),
        name="stall",
    ).validate()
    outcome = resume_check(scenario)
    run = outcome.phases[0]
    deadline = stall_deadline_s((stall,), TIMEOUT_S)
    assert deadline is not None and run.result.duration_s <= deadline + 15
    assert unexplained(outcome) == [], outcome.report()
    assert STALLED_STORE_LINK in explaining(outcome)
