"""The declared space follows the strategies' constants, says why a cell is out of reach, and
the coverage section marks the cells a run never reached."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis import strategies as st

from zephon_chaos import strategies
from zephon_chaos.dimensions import settings as settings_table
from zephon_chaos.dimensions.cells import ROUND_POINTS, Dim, Why, cell
from zephon_chaos.explore import fault_dims, layout_dims
from zephon_chaos.explore import space as space_module
from zephon_chaos.explore.landing import cells_of, rarity
from zephon_chaos.explore.space import declare
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.explore.summary import NEVER, Coverage
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import PROCESS_ENDING_ACTIONS
from zephon_chaos.strategies import scenarios
from zephon_chaos.workload.spec import RETRIES, CheckpointAt, PipelineSpec

CONSTANTS = (
    "AGGREGATE_TIMEOUTS_S",
    "AGGREGATION_CHOICES",
    "COMPRESSOR_CHOICES",
    "PREFETCH_CHOICES",
    "SERIALIZER_CHOICES",
    "SHUTDOWN_CHOICES",
    "DATA_KINDS",
    "EXHAUSTION_CHOICES",
    "LAUNCH_CHOICES",
    "MAPPING_CHOICES",
    "MTP_CHOICES",
    "PERSIST_FORMATS",
    "PROCESS_FAULTS",
    "RANK_FAULT_POINTS",
    "ROUND_FAULTS",
    "DEPLOYMENT_CHOICES",
    "RUNNER_CHOICES",
    "STORE_TOXICS",
    "THREAD_FAULTS",
)


def values(space: space_module.Space, dim: Dim) -> list[tuple[str, ...]]:
    return [d.cell.value for d in space.cells if d.cell.dim is dim]


@pytest.mark.parametrize("name", CONSTANTS)
def test_the_space_imports_the_strategies_constants_rather_than_copying_them(name: str) -> None:
    tables = (layout_dims, fault_dims, settings_table)
    assert any(getattr(m, name, None) is getattr(strategies, name) for m in tables)


def test_declared_cells_enumerate_every_value_of_the_strategies_constants() -> None:
    s = declare("torchrun", max_world=3, max_phases=4, store_faults=True)
    assert values(s, Dim.WORLD_SIZE) == [("1",), ("2",), ("3",)]
    assert values(s, Dim.LAUNCHES) == [(str(n),) for n in range(1, 5)]
    assert values(s, Dim.PERSISTENCE) == [(f,) for f in strategies.PERSIST_FORMATS]
    assert values(s, Dim.LAUNCH_PATH) == [(p,) for p in strategies.LAUNCH_CHOICES]
    assert values(s, Dim.RUNNER) == [(r,) for r in strategies.RUNNER_CHOICES]
    assert {v[0] for v in values(s, Dim.RANK_FAULT)} == {
        *strategies.PROCESS_FAULTS,
        *strategies.ROUND_FAULTS,
        *strategies.THREAD_FAULTS,
    }
    store = values(s, Dim.STORE_FAULT)
    assert len(store) == (
        len(strategies.STORE_TOXICS)
        * len(ROUND_POINTS)
        * len(strategies.AGGREGATION_CHOICES)
        * len(RETRIES)
    )
    assert ROUND_POINTS[0] == "start" and set(ROUND_POINTS[1:]) <= {v[1] for v in store}


def test_adding_a_value_to_a_constant_adds_a_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    before = declare("inproc")
    striped = tuple(
        replace(s, values=(*s.values, "striped")) if s.field == "mapping" else s
        for s in settings_table.SETTINGS
    )
    monkeypatch.setattr(settings_table, "SETTINGS", striped)
    after = declare("inproc")
    assert len(after.cells) == len(before.cells) + 1
    assert cell(Dim.MAPPING, "striped") in after.reachable()


@pytest.mark.parametrize(
    ("space", "the_cell", "why"),
    [
        (("inproc",), cell(Dim.RUNNER, "process"), Why.THREADS_NO_WORKERS),
        (("inproc",), cell(Dim.PERSISTENCE, "dcp"), Why.THREADS_NO_PROCESS_GROUP),
        (("torchrun", True), cell(Dim.PERSISTENCE, "dcp"), Why.DCP_WITH_LINK_FAULTS),
        (("inproc",), cell(Dim.TIMEOUT, 2.0), None),
        (("inproc",), cell(Dim.LAUNCH_PATH, "c10d"), Why.THREADS_NO_LAUNCH_PATH),
        (("inproc",), cell(Dim.RANK_FAULT, "sigkill"), Why.THREADS_NO_PROCESS_FAULT),
        (("inproc",), cell(Dim.STORE_FAULT, "down", "shard", "store", "none"),
         Why.STORE_FAULTS_OFF),
        (("inproc", True), cell(Dim.STORE_FAULT, "down", "shard", "store", "none"), None),
        (("inproc", True), cell(Dim.STORE_FAULT, "timeout", "shard", "store", "none"),
         Why.THREAD_STALL),
        (("torchrun",), cell(Dim.RANK_FAULT_POINT, "sigkill", "ack", "store", "skip"),
         Why.ENDS_GROUP),
        (("torchrun",), cell(Dim.RANK_FAULT_POINT, "sigstop", "ack", "store", "skip"), None),
        (("torchrun",), cell(Dim.STORE_FAULT_OUTCOME, "failed"), Why.STORE_FAULTS_OFF),
        (("torchrun", True), cell(Dim.STORE_FAULT, "reset_peer", "start", "store", "none"),
         Why.RESET_AT_START),
        (("torchrun", True), cell(Dim.STORE_FAULT, "latency", "shard", "dir", "lockstep"),
         Why.DIR_NO_STORE),
        (("torchrun", True), cell(Dim.AGGREGATION, "dir"), None),
        (("inproc",), cell(Dim.RANK_FAULT_POINT, "raise", "shard", "store", "lockstep"), None),
        (("torchrun",), cell(Dim.RANK_FAULT_POINT, "sigstop", "step", "store", "none"),
         Why.STOP_AT_STEP),
        (("torchrun",), cell(Dim.RANK_FAULT_POINT, "sigkill", "step", "store", "lockstep"),
         Why.RETRY_NEEDS_ROUND),
        (("torchrun",), cell(Dim.RANK_FAULT_POINT, "exit", "participants", "dir", "none"),
         Why.DIR_NO_PARTICIPANTS),
        (("torchrun",), cell(Dim.RANK_FAULT_ROLE, "outcome", "follower"), Why.LEADER_ONLY),
        (("torchrun",), cell(Dim.RANK_FAULT_ROLE, "ack", "leader"), Why.FOLLOWER_ONLY),
        (("inproc",), cell(Dim.RANK_FAULT_OUTCOME, "failed"), None),
        (("torchrun", True), cell(Dim.STORE_FAULT_ROLE, "ack", "leader"), Why.FOLLOWER_ONLY),
        (("torchrun", True), cell(Dim.STORE_FAULT_ROLE, "announce", "follower"),
         Why.LEADER_ONLY),
    ],
)
def test_unreachable_cells_carry_the_reason(
    space: tuple, the_cell: object, why: Why | None
) -> None:
    tier, *store = space
    s = declare(tier, store_faults=bool(store))
    assert the_cell in s
    assert s.why_not(the_cell) is why  # type: ignore[arg-type]


@pytest.mark.parametrize("store_faults", [False, True])
def test_round_point_rank_faults_and_explicit_store_link_faults_are_reachable(
    store_faults: bool,
) -> None:
    s = declare("torchrun", store_faults=store_faults)
    for action in strategies.ROUND_FAULTS:
        for point in ROUND_POINTS[1:]:
            for agg in strategies.STORE_FAULT_AGGREGATIONS:
                for retry in RETRIES:
                    c = cell(Dim.RANK_FAULT_POINT, action, point, agg, retry)
                    ends = action in PROCESS_ENDING_ACTIONS and retry != RETRIES[0]
                    assert s.why_not(c) is (Why.ENDS_GROUP if ends else None), c
    assert s.why_not(cell(Dim.RANK_FAULT_ROLE, "shard", "leader")) is None
    assert s.why_not(cell(Dim.RANK_FAULT_ROLE, "shard", "follower")) is None
    if store_faults:
        for toxic in strategies.STORE_TOXICS:
            c = cell(Dim.STORE_FAULT, toxic, "shard", "store_explicit", "none")
            assert s.why_not(c) is None, c


def test_one_world_size_and_one_launch_leave_resizes_and_resumes_unreachable() -> None:
    s = declare("inproc", max_world=1, max_phases=1)
    assert s.why_not(cell(Dim.TRAJECTORY, "growth")) is Why.ONE_LAUNCH
    assert s.why_not(cell(Dim.TRAJECTORY, "G > C (refusal expected)")) is Why.ONE_WORLD_SIZE
    assert s.why_not(cell(Dim.RESUME, "same size", "mid-window")) is Why.ONE_LAUNCH


SPACES = st.sampled_from(
    [
        ("inproc", False, 4, "default"),
        ("torchrun", False, 4, "default"),
        ("torchrun", True, 3, "default"),
        ("inproc", True, 3, "default"),
        ("inproc", False, 1, "default"),
        ("torchrun", False, 2, "downstream"),
    ]
)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_scenarios_land_only_on_reachable_declared_cells(data: st.DataObject) -> None:
    """A cell marked unreachable that the strategies reach would be a false hole."""
    tier, store_faults, max_world, profile = data.draw(SPACES)
    scenario = data.draw(
        scenarios(
            tier=tier,  # type: ignore[arg-type]
            store_faults=store_faults,
            max_world=max_world,
            profile=profile,  # type: ignore[arg-type]
        )
    )
    s = declare(tier, max_world=max_world, store_faults=store_faults, profile=profile)
    for c in cells_of(scenario, None):
        assert c in s, c
        assert s.why_not(c) is None, (c, s.why_not(c))


def two_launches() -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(1, 2, (CheckpointAt(1),)), Launch(2, 1)),
    )


def test_a_cell_never_reached_is_marked_and_one_reached_counts_once(tmp_path: Path) -> None:
    cov = Coverage()
    cov.add(two_launches(), None, "inproc")
    cov.add(two_launches(), None, "inproc")
    rows = {d.cell: n for d, n in cov.table("inproc")}
    assert rows[cell(Dim.LAUNCHES, 2)] == 2
    assert rows[cell(Dim.WORLD_SIZE, 1)] == 2  # twice a scenario, counted once per scenario
    assert rows[cell(Dim.LAUNCHES, 5)] == 0
    text = "\n".join(cov.section(tmp_path, max_world=4))
    assert f"| launches | 5 | {NEVER} |" in text
    assert "| launches | 2 | 2 |" in text
    assert Why.THREADS_NO_WORKERS.value in text
    assert "Not measured" in text  # no round ran, so no code was measured


def test_rarity_scores_the_rarest_reachable_cell() -> None:
    s = declare("inproc")
    seen = cell(Dim.LAUNCHES, 1)
    new = cell(Dim.LAUNCHES, 2)
    unreachable = cell(Dim.RUNNER, "process")
    assert rarity([seen], Counter({seen: 3}), s) == 0.25
    assert rarity([seen, new], Counter({seen: 3}), s) == 1.0
    assert rarity([unreachable], Counter(), s) == 0.0


def test_steering_calls_target_inside_a_property_without_error() -> None:
    """``observe`` runs inside Hypothesis's test function (``target`` is refused elsewhere)."""
    cov = Coverage()
    ran: list[int] = []

    class Options:
        max_world, max_phases, store_faults, profile = 2, 2, False, "default"

    # a torchrun round: steering without arming the measuring of Zephon's code
    with RoundSteering(cov, "torchrun", Options(), round_no=1) as steering:

        @settings(
            max_examples=30,
            database=None,
            phases=[HypothesisPhase.generate, HypothesisPhase.target],
            suppress_health_check=list(HealthCheck),
        )
        @given(scenarios(tier="torchrun", max_world=2, max_phases=2))
        def prop(scenario: Scenario) -> None:
            cov.add(scenario, None, "torchrun")
            steering.observe(scenario)
            ran.append(1)

        prop()
    assert len(ran) >= 30
    assert "torchrun" in cov.spaces
