"""Hosted-store faults and torchrun restarts in the scenario model: rules, repairs, refusals,
generation and coverage cells."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import Phase as HPhase

from zephon_chaos.dimensions.cells import Dim, Relaunch, cell
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.space import declare
from zephon_chaos.inproc.refusal import inproc_refusal
from zephon_chaos.scenario import Launch, Scenario, ScenarioError, StoreFault
from zephon_chaos.scenario_rules import normalised, violations
from zephon_chaos.strategies import STORE_FAULT_TIMEOUT_S, scenarios
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankFault

CPS = (CheckpointAt(1), CheckpointAt(2))


def hosted(*phases: Launch, aggregation: str = "store_explicit") -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregation=aggregation),  # type: ignore[arg-type]
        launches=phases,
    )


def fields(s: Scenario) -> list[str]:
    return [v.field for v in violations(s)]


def test_a_store_fault_at_a_round_point_of_the_hosted_store_is_valid_and_round_trips() -> None:
    fault = StoreFault("sigstop", "shard#2", 12.0)
    s = hosted(Launch(2, 3, CPS, store_faults=(fault,)), Launch(2, 1))
    assert violations(s) == []
    assert Scenario.from_json(s.to_json()).launches[0].store_faults == s.launches[0].store_faults


@pytest.mark.parametrize(
    ("fault", "aggregation", "field"),
    [
        (StoreFault("kill", "shard"), "store", "launches[0].store_faults"),
        (StoreFault("explode", "shard"), "store_explicit", "launches[0].store_faults[0].action"),
        (StoreFault("kill", "start"), "store_explicit", "launches[0].store_faults[0].at"),
        (StoreFault("kill", "ack#3"), "store_explicit", "launches[0].store_faults[0].at"),
        (
            StoreFault("sigstop", "ack", 0.0),
            "store_explicit",
            "launches[0].store_faults[0].stall_s",
        ),
    ],
)
def test_a_store_fault_no_run_can_apply_is_named_by_its_field(
    fault: StoreFault, aggregation: str, field: str
) -> None:
    s = hosted(Launch(2, 3, CPS, store_faults=(fault,)), Launch(2, 1), aggregation=aggregation)
    assert field in fields(s)
    with pytest.raises(ScenarioError, match=field.replace("[", r"\[").replace("]", r"\]")):
        s.validate()


def test_a_store_fault_beside_a_rank_fault_is_refused_and_normalising_drops_it() -> None:
    ph = Launch(
        2, 3, CPS, rank_faults=(RankFault(1, 3, "sigkill"),), store_faults=(StoreFault("kill"),)
    )
    s = hosted(ph, Launch(2, 1))
    assert "launches[0].store_faults" in fields(s)
    fixed = normalised(s)
    assert fixed.launches[0].store_faults == () and violations(fixed) == []


def test_normalising_times_a_store_fault_by_a_round_and_drops_one_no_round_can_time() -> None:
    at_start = (StoreFault("kill", "start"),)
    s = normalised(hosted(Launch(2, 3, CPS, store_faults=at_start), Launch(2, 1)))
    assert s.launches[0].store_faults == (StoreFault("kill", "announce"),)
    one_rank = normalised(
        hosted(Launch(1, 3, CPS, store_faults=(StoreFault("kill"),)), Launch(1, 1))
    )
    assert one_rank.launches[0].store_faults == ()


def test_restarts_need_a_rank_fault_of_attempt_zero() -> None:
    bare = hosted(Launch(2, 3, CPS, max_restarts=1), Launch(2, 1))
    assert "launches[0].max_restarts" in fields(bare)
    every = hosted(Launch(2, 3, CPS, rank_faults=(RankFault(0, 2, "exit"),), max_restarts=1))
    assert "launches[0].rank_faults[0].restart" in fields(every)
    fixed = normalised(every)
    assert fixed.launches[0].rank_faults == (RankFault(0, 2, "exit", restart=0),)
    assert violations(fixed) == []
    assert normalised(bare).launches[0].max_restarts == 0


def test_a_restarted_launch_may_run_free() -> None:
    """Free-running survivors may leave a round open in the store the restart reuses: a state
    a crash leaves, judged (``dead-round-meets-relaunch``), no longer refused."""
    fault = (RankFault(1, 1, "exit", restart=0),)
    free = hosted(Launch(2, 3, (CheckpointAt(3),), rank_faults=fault, max_restarts=1, sync="free"))
    assert violations(free) == []
    assert normalised(free) == free


@pytest.mark.parametrize("aggregation", ["store", "store_explicit", "dir"])
@pytest.mark.parametrize("action", ["raise", "exit", "sigkill", "sigterm"])
def test_a_round_point_fault_under_restarts_is_in_the_space(aggregation: str, action: str) -> None:
    fault = (RankFault(1, 0, action, restart=0, at="shard"),)
    s = hosted(Launch(2, 3, CPS, rank_faults=fault, max_restarts=1), aggregation=aggregation)
    assert violations(s) == []
    assert normalised(s) == s
    assert s.restart_kept(0) == CPS[0], "the faulted round's checkpoint may have persisted"


def test_a_crash_loop_fires_in_at_most_max_restarts_attempts() -> None:
    """A fault in attempts 0..k-1 and not in k: k failed attempts, then one that runs through."""
    loop = (RankFault(1, 2, "sigkill", restart=0, attempts=2),)
    s = hosted(Launch(2, 3, (CheckpointAt(1),), rank_faults=loop, max_restarts=2))
    assert violations(s) == []
    assert s.reference_steps == 2 * 1 + 3, "each failed attempt keeps its checkpoint's batches"
    assert [loop[0].fires_in(a) for a in range(3)] == [True, True, False]
    every = replace(s, launches=(replace(s.launches[0], max_restarts=1),))
    assert "launches[0].rank_faults[0].attempts" in fields(every)
    assert normalised(every).launches[0].rank_faults[0].attempts == 1


def test_a_restarted_launch_counts_attempt_zeros_kept_batches_in_the_reference() -> None:
    """Attempt 0 keeps the batches before checkpoint 0 (step 1); attempt 1 runs its 3 steps."""
    fault = (RankFault(0, 2, "sigkill", restart=0),)
    s = hosted(Launch(2, 3, (CheckpointAt(1),), rank_faults=fault, max_restarts=1))
    assert s.restart_kept(0) == CheckpointAt(1)
    assert s.reference_steps == 1 + 3
    assert s.restore_index(0) == 0, "the launch succeeds after the restart: its last checkpoint"


def test_a_restarted_tensor_parallel_launch_keeps_its_checkpoint() -> None:
    """4 ranks at TP 2 are 2 DP groups, within C=2: the checkpoint before the fault counts."""
    fault = (RankFault(0, 2, "sigkill", restart=0),)
    s = hosted(Launch(4, 3, (CheckpointAt(1),), rank_faults=fault, max_restarts=1, tp=2))
    assert s.restart_kept(0) == CheckpointAt(1)


@pytest.mark.parametrize(
    ("phase", "field"),
    [
        (Launch(2, 3, CPS, store_faults=(StoreFault("kill"),)), "store_faults"),
        (
            Launch(2, 3, CPS, rank_faults=(RankFault(0, 2, "raise", restart=0),), max_restarts=1),
            "max_restarts",
        ),
    ],
)
def test_the_in_process_tier_refuses_them_naming_the_field(phase: Launch, field: str) -> None:
    reason = inproc_refusal(hosted(phase).validate())
    assert reason is not None and reason.startswith(f"scenario.launches[0].{field}:")


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(scenarios(tier="torchrun"))
def test_generated_hosted_store_faults_and_restarts_obey_the_rules(s: Scenario) -> None:
    assert violations(s) == []
    for ph in s.launches:
        if ph.store_faults:
            assert s.pipeline.aggregation == "store_explicit"
            assert s.pipeline.aggregate_timeout_s == STORE_FAULT_TIMEOUT_S
        if ph.max_restarts:
            assert ph.rank_faults and all(f.restart == 0 for f in ph.rank_faults)


@pytest.mark.parametrize("action", ["restart", "kill", "sigstop"])
def test_the_strategies_reach_each_hosted_store_fault_and_land_on_its_cell(action: str) -> None:
    s = find(
        scenarios(tier="torchrun"),
        lambda s: any(f.action == action for ph in s.launches for f in ph.store_faults),
        settings=settings(
            max_examples=3000, deadline=None, database=None, phases=(HPhase.generate,)
        ),
    )
    # The scenario may hold several store faults; the cell is the one of the fault found.
    f = next(f for ph in s.launches for f in ph.store_faults if f.action == action)
    landed = cell(Dim.HOSTED_STORE_FAULT, action, f.at.partition("#")[0])
    space = declare("torchrun")
    assert landed in cells_of(s, None) and space.why_not(landed) is None


def test_the_strategies_reach_a_hosted_store_fault_under_the_process_runner() -> None:
    """The recipe's runner: the rank process runs the round, so its store can be faulted."""
    find(
        scenarios(tier="torchrun"),
        lambda s: s.pipeline.runner == "process" and any(ph.store_faults for ph in s.launches),
        settings=settings(
            max_examples=3000, deadline=None, database=None, phases=(HPhase.generate,)
        ),
    )


def test_the_declared_space_says_why_threads_reach_no_hosted_store_fault_or_restart() -> None:
    space = declare("inproc")
    assert space.why_not(cell(Dim.HOSTED_STORE_FAULT, "kill", "shard")) is not None
    assert space.why_not(cell(Dim.RESTARTS, 1)) is not None
    assert space.why_not(cell(Dim.RESTARTS, 0)) is None
    torchrun = declare("torchrun")
    assert torchrun.why_not(cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value)) is None


def test_a_relaunch_after_a_crash_against_the_hosted_store_lands_on_its_cell() -> None:
    crash = Launch(2, 3, CPS, rank_faults=(RankFault(1, 2, "sigkill"),))
    s = hosted(crash, Launch(2, 1)).validate()
    assert cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value) in cells_of(s, None)
    torchruns = replace(s, pipeline=replace(s.pipeline, aggregation="store"))
    assert cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value) not in cells_of(torchruns, None)


@pytest.mark.parametrize(
    "drawn",
    [
        pytest.param(lambda ph: any(f.at_round for f in ph.rank_faults), id="round-point-fault"),
        pytest.param(lambda ph: ph.sync == "free", id="free-running-ranks"),
    ],
)
def test_the_strategies_draw_it_under_restarts(drawn: object) -> None:
    """What the removed refusals kept out, the torchrun tier now draws beside restarts."""
    found = find(
        scenarios(tier="torchrun"),
        lambda s: any(ph.max_restarts and drawn(ph) for ph in s.launches),  # type: ignore[operator]
        settings=settings(max_examples=3000, deadline=None, phases=[HPhase.generate]),
    )
    assert violations(found) == []
