"""Rank faults at round points and link faults on the harness's store, without a group: the
rules that admit them, the triggers they become, the deadline of a stalled link, and the
known defect that explains a stall's outcome."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from zephon_chaos.explore.known import STALLED_STORE_LINK, explaining, unexplained
from zephon_chaos.faults.control import CALL_ENDED, InterposerControl, notify
from zephon_chaos.faults.placement import place_store_proxy
from zephon_chaos.nemeses.round_faults import RoundFaultLaunch, triggers_for
from zephon_chaos.nemeses.scenario_proxy import FaultedLaunch, stall_deadline_s
from zephon_chaos.oracles.faults import failure_bound_s
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.scenario import Launch, ProxyFault, Scenario, ScenarioError
from zephon_chaos.scenario_rules import normalised, violations
from zephon_chaos.workload.spec import CheckpointAt, PhaseTrigger, PipelineSpec, RankFault


def _faulted(
    fault: RankFault, world: int = 2, aggregation: str = "store", **pipeline: Any
) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=4, aggregation=aggregation, **pipeline),  # type: ignore[arg-type]
        launches=(
            Launch(world, 3, (CheckpointAt(1), CheckpointAt(2)), rank_faults=(fault,)),
            Launch(2, 2),
        ),
    )


POINTS_AND_WRITERS = [
    ("announce", 0), ("shard", 0), ("shard#2", 1), ("participants", 1), ("outcome#2", 0),
    ("ack", 1),
]


@pytest.mark.parametrize("action", ["raise", "exit", "sigkill", "sigterm", "sigstop"])
@pytest.mark.parametrize(
    ("at", "rank", "aggregation"),
    [
        (at, rank, aggregation)
        for aggregation in ("store", "store_explicit", "dir")
        for at, rank in POINTS_AND_WRITERS
        if not (aggregation == "dir" and at == "participants")  # no such file (refused below)
    ],
)
def test_a_rank_fault_at_any_round_point_is_valid_where_its_rank_writes_it(
    action: str, at: str, rank: int, aggregation: str
) -> None:
    scenario = _faulted(RankFault(rank, 0, action, at=at), aggregation=aggregation)
    assert violations(scenario) == []
    assert normalised(scenario) == scenario


REFUSED = {
    "leader point on a follower": (RankFault(1, 0, "sigkill", at="announce"), {}, ".rank"),
    "ack on the leader": (RankFault(0, 0, "raise", at="ack"), {}, ".rank"),
    "round past the checkpoints": (RankFault(1, 0, "exit", at="shard#3"), {}, ".at: round 3"),
    "not a point": (RankFault(1, 0, "exit", at="start"), {}, ".at"),
    "an action no point times": (RankFault(1, 0, "kill_agent", at="shard"), {}, ".action"),
    "participants on aggregate_dir": (
        RankFault(1, 0, "raise", at="participants"),
        {"aggregation": "dir"},
        ".at: no rank writes 'participants': aggregate_dir has no participants write",
    ),
    "one rank on aggregate_dir": (
        RankFault(0, 0, "raise", at="shard"), {"world": 1, "aggregation": "dir"}, ".at: no round"
    ),
    "mtp_mode": (RankFault(1, 0, "raise", at="shard"), {"mtp_mode": True}, ".at: no"),
    "one rank": (RankFault(0, 0, "raise", at="shard"), {"world": 1}, ".at: no round"),
    "a stop at a step": (RankFault(1, 1, "sigstop"), {}, ".at: a sigstop at a step"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_rank_fault_no_round_can_time_is_refused_and_normalised_away(name: str) -> None:
    fault, options, field = REFUSED[name]
    options = dict(options)
    world = options.pop("world", 2)
    scenario = _faulted(fault, world=world, **options)
    with pytest.raises(ScenarioError, match=re.escape(f"launches[0].rank_faults[0]{field}")):
        scenario.validate()
    fixed = normalised(scenario).validate()
    assert normalised(fixed) == fixed
    kept = fixed.launches[0].rank_faults
    assert all(f.at_round for f in kept) or not any(f.action == "sigstop" for f in kept)


def test_normalising_moves_a_round_point_fault_to_a_rank_that_writes_its_point() -> None:
    leader = normalised(_faulted(RankFault(1, 0, "sigkill", at="outcome")))
    follower = normalised(_faulted(RankFault(0, 0, "sigkill", at="ack#2")))
    assert leader.launches[0].rank_faults == (RankFault(0, 0, "sigkill", at="outcome"),)
    assert follower.launches[0].rank_faults == (RankFault(1, 0, "sigkill", at="ack#2"),)


def test_a_round_point_fault_is_alone_and_admits_a_retry_policy() -> None:
    scenario = _faulted(RankFault(1, 0, "raise", at="shard"))
    both = scenario.with_(
        launches=(
            replace(scenario.launches[0], rank_faults=(RankFault(1, 0, "raise", at="shard"),
                                                     RankFault(0, 1, "exit"))),
            scenario.launches[1],
        )
    )
    assert any(v.field == "launches[0].rank_faults" for v in violations(both))
    retried = scenario.with_(
        launches=(replace(scenario.launches[0], retry="lockstep"), scenario.launches[1])
    )
    assert violations(retried) == []
    assert normalised(retried).launches[0].retry == "lockstep"


def test_dcp_persistence_takes_a_round_point_fault() -> None:
    """Once refused (``rank-point-dcp``): with retry none the rank whose round failed exits
    and torchrun ends the group, so no collective save blocks (docs/space.md, put back)."""
    scenario = _faulted(RankFault(1, 0, "sigkill", at="ack")).with_(persist_format="dcp")
    assert violations(scenario) == []
    assert normalised(scenario).launches[0].rank_faults == scenario.launches[0].rank_faults


def test_a_link_fault_on_the_harness_store_is_valid() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregation="store_explicit"),
        launches=(
            Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)),
                  proxy_faults=(ProxyFault(1, "timeout", {"timeout": 0}, at="shard#2"),)),
            Launch(2, 2),
        ),
    )
    assert violations(scenario) == []


def test_a_fault_becomes_its_trigger_and_a_followers_stop_observes_the_outcome() -> None:
    assert triggers_for(RankFault(1, 0, "sigkill", at="shard#2")) == (
        PhaseTrigger(1, "shard", "sigkill", occurrence=2),
    )
    assert triggers_for(RankFault(1, 0, "sigstop", at="participants")) == (
        PhaseTrigger(1, "participants", "sigstop"),
        PhaseTrigger(0, "outcome", "event", occurrence=1, when="after"),
    )
    assert triggers_for(RankFault(0, 0, "sigstop", at="announce")) == (
        PhaseTrigger(0, "announce", "sigstop"),
    )
    stop_at_ack = (PhaseTrigger(1, "ack", "sigstop"),)
    assert triggers_for(RankFault(1, 0, "sigstop", at="ack")) == stop_at_ack
    assert triggers_for(RankFault(1, 2, "sigkill")) == ()


def test_a_stalled_link_gets_a_short_deadline_and_others_none() -> None:
    stall = (ProxyFault(1, "timeout", {"timeout": 0}, at="shard"),)
    assert stall_deadline_s(stall, 2.0) == failure_bound_s(2.0) + 30.0
    assert stall_deadline_s((ProxyFault(1, "down", at="shard"),), 2.0) is None


def test_a_ranks_proxy_points_at_the_harness_store_with_store_explicit(monkeypatch) -> None:
    calls: list[tuple[str, str]] = []

    class Client:
        def __init__(self, url: str, timeout_s: float) -> None: ...
        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None: ...

        def update_proxy(self, name: str, upstream: str) -> Any:
            calls.append((name, upstream))
            return SimpleNamespace(port=4100, listen="127.0.0.1:4100", upstream=upstream,
                                   enabled=True)

    monkeypatch.setattr("zephon_chaos.faults.proxy.client.ToxiproxyClient", Client)
    spec = SimpleNamespace(
        store_proxy_ports={"1": 4100},
        store_proxy_names={"1": "zc-r1"},
        proxy_api_url="http://127.0.0.1:1",
        pipeline=PipelineSpec(aggregation="store_explicit"),
        store_uri="torch://127.0.0.1:5555",
    )
    placed = place_store_proxy(spec, 1, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert calls == [("zc-r1", "127.0.0.1:5555")]
    assert placed is not None and placed.store_uri == "torch://127.0.0.1:4100"


def _stalled_outcome(problem: Problem, toxic: str = "timeout") -> Any:
    fault = ProxyFault(1, toxic, {"timeout": 0}, at="shard#2")
    launch = FaultedLaunch((fault,), proxies=None, evidence=["rank 1's interposer applied"])  # type: ignore[arg-type]
    # a first launch: it restored nothing
    spec = SimpleNamespace(restore_from=None)
    run = SimpleNamespace(index=0, fault=launch, liveness=None, records=[], spec=spec)
    scenario = Scenario(launches=(Launch(2, 1),))
    return SimpleNamespace(phases=[run], problems=[problem], scenario=scenario)


@pytest.mark.parametrize(
    "problem",
    [
        Problem(
            Area.FAULT,
            ProblemKind.HANG,
            "hang: the group passed its deadline after 39.0s (aggregate_timeout_s=2.0)",
        ).in_phase(0),
        Problem(
            Area.FAULT,
            ProblemKind.SLOW_FAILURE,
            "rank 1 took 14.2s to fail one attempt, over the bound 9.0s (3 x ...)",
            rank=1,
        ).in_phase(0),
        Problem(
            Area.LIVENESS,
            ProblemKind.UNBOUNDED_WAIT,
            "phase 0: liveness: unbounded wait: rank 0's checkpoint 1 attempt 1 blocked 20.00s, "
            "over the bound 9.00s",
            phase=0,
        ),
    ],
    ids=["hang", "slow-failure", "unbounded-wait"],
)
def test_a_stalled_links_outcome_is_the_known_defect(problem: Problem) -> None:
    outcome = _stalled_outcome(problem)
    assert STALLED_STORE_LINK in explaining(outcome)  # type: ignore[arg-type]
    assert unexplained(outcome) == []  # type: ignore[arg-type]


def test_the_same_problem_without_a_stall_is_not_explained() -> None:
    problem = Problem(Area.FAULT, ProblemKind.HANG, "hang: after 39.0s").in_phase(0)
    assert unexplained(_stalled_outcome(problem, toxic="down")) == [problem]  # type: ignore[arg-type]
    other = Problem(
        Area.CHECKPOINT, ProblemKind.DIFFERS, "checkpoint 1 differs", checkpoint=1
    ).in_phase(0)
    assert unexplained(_stalled_outcome(other)) == [other]  # type: ignore[arg-type]


def _heard_calls(ranks: tuple[int, ...], bound: float) -> str:
    """What a stopped rank 0's watcher (world 3, faulted round 2) makes of ``ranks``' calls
    of checkpoint 1 ended, each sent as a rank sends it, plus one of another checkpoint."""
    launch = RoundFaultLaunch(RankFault(0, 0, "sigstop", at="announce#2"), 2.0, world_size=3)
    with InterposerControl() as control:
        notify(control.name, {"kind": CALL_ENDED, "rank": 1, "index": 0})
        for r in ranks:
            notify(control.name, {"kind": CALL_ENDED, "rank": r, "index": 1})
        return launch._others_ended(control, bound)


def test_a_stopped_rank_is_continued_once_every_other_ranks_call_ended() -> None:
    assert _heard_calls((2, 1), bound=60.0) == "calls ended"


def test_a_stopped_rank_waits_out_the_bound_while_a_call_has_not_ended() -> None:
    with pytest.raises(TimeoutError):
        _heard_calls((2,), bound=0.2)
