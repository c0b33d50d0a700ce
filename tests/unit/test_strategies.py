"""The scenario strategies: always valid, cover what users reach, shrink to the simplest."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from zephon_chaos.inproc import inproc_refusal
from zephon_chaos.scenario import ProxyFault, Scenario
from zephon_chaos.scenario_rules import (
    HEALING_TOXICS,
    LEADER_POINTS,
    POINT_AGGREGATIONS,
    RANK_POINT_ACTIONS,
    STORE_AGGREGATIONS,
    is_finite,
    lanes_per_rank,
    normalised,
    rank_point,
    violations,
)
from zephon_chaos.scenario_rules.predicates import CHILD_TAIL_ROWS
from zephon_chaos.strategies import (
    DOWNSTREAM_AGGREGATION_ODDS,
    DOWNSTREAM_MTP_ODDS,
    DOWNSTREAM_RUNNER_ODDS,
    PERSIST_FORMATS,
    REFUSAL_ERROR,
    RUN_DRY_STEPS,
    STORE_FAULT_TIMEOUT_S,
    STORE_TOXICS,
    THREAD_TOXICS,
    TORCHRUN_MTP_ODDS,
    TORCHRUN_RUNNER_ODDS,
    persist_odds,
    scenarios,
)
from zephon_chaos.validation.value_sets import (
    AGGREGATE_COMPRESSORS,
    AGGREGATE_SERIALIZERS,
    SHUTDOWN_MODES,
)
from zephon_chaos.workload.spec import (
    RETRIES,
    ROUND_PHASES,
    CheckpointAt,
    ChildFault,
    PipelineSpec,
    RankFault,
)

SHRINK = settings(
    database=None,
    max_examples=3000,
    suppress_health_check=list(HealthCheck),
    deadline=None,
    phases=[Phase.generate, Phase.shrink],  # no explain phase: it reran `find`'s example ~200 times
)
REACH = settings(SHRINK, phases=[Phase.generate])
"""Reaching a feature needs no shrinking: the first example that has it will do."""


TIERS = ("inproc", "inproc+store-faults", "torchrun", "torchrun+store-faults")


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.sampled_from(TIERS).flatmap(
        lambda t: scenarios(tier=t.split("+")[0], store_faults=t.endswith("faults"))  # type: ignore[arg-type]
    )
)
def test_every_generated_scenario_is_valid_and_round_trips(scenario: Scenario) -> None:
    assert Scenario.from_json(scenario.to_json()) == scenario
    for i, ph in enumerate(scenario.launches):
        refused = ph.dp > scenario.canonical_replicas(i)  # DP groups, not ranks
        assert refused == ph.expect_failure
        if refused:
            assert ph.expect_error == REFUSAL_ERROR


SPACES = st.tuples(st.sampled_from(TIERS), st.integers(1, 5))
ANY_SCENARIO = SPACES.flatmap(
    lambda space: scenarios(
        tier=space[0].split("+")[0],  # type: ignore[arg-type]
        store_faults=space[0].endswith("faults"),
        max_world=space[1],
    )
)
"""A scenario of either tier, with or without link faults, for any max_world 1..5."""


@settings(max_examples=300, deadline=None, database=None)
@given(ANY_SCENARIO)
def test_every_generated_scenario_obeys_the_one_validity_model(scenario: Scenario) -> None:
    """Both tiers, with and without link faults, any max_world: nothing validation refuses,
    and nothing normalising would change (generation builds through the same rules)."""
    assert violations(scenario) == []
    assert normalised(scenario) == scenario
    assert scenario.validate() is scenario


@settings(max_examples=150, deadline=None, database=None)
@given(st.booleans().flatmap(lambda links: scenarios(tier="inproc", store_faults=links)))
def test_the_in_process_tier_gets_only_what_threads_can_run(scenario: Scenario) -> None:
    assert inproc_refusal(scenario) is None


def _resumes(s: Scenario) -> list[tuple[int, int, bool]]:
    """(from, to, mid-window) of every launch that restores a checkpoint."""
    out, taken = [], None
    for i, ph in enumerate(s.launches):
        if ph.expect_failure:
            continue
        if taken is not None:
            out.append((taken[0], ph.world_size, taken[1]))
        k = s.restore_index(i)
        if k is not None:
            taken = (ph.world_size, _is_mid_window(s, i, k))
    return out


def _is_mid_window(s: Scenario, i: int, k: int) -> bool:
    ph = s.launches[i]
    _, extra = sorted({(c.step, c.extra) for c in ph.checkpoints})[k]
    per = lanes_per_rank(ph.world_size, s.canonical_replicas(i), s.pipeline.mapping)
    return any(0 < min(extra, p) < p for p in per)


def _mid_window(s: Scenario) -> bool:
    return any(
        0 < c.extra < max(lanes_per_rank(ph.world_size, s.canonical_replicas(i), "contiguous"))
        for i, ph in enumerate(s.launches)
        if not ph.expect_failure
        for c in ph.checkpoints
    )


REACHABLE: dict[str, Callable[[Scenario], bool]] = {
    "five launches": lambda s: len(s.launches) == 5,
    "the same size again": lambda s: any(a == b for a, b, _ in _resumes(s)),
    "growth": lambda s: any(a < b for a, b, _ in _resumes(s)),
    "shrink": lambda s: any(a > b for a, b, _ in _resumes(s)),
    "G not dividing C": lambda s: any(
        s.pipeline.canonical_replicas % ph.world_size for ph in s.launches if not ph.expect_failure
    ),
    "G > C refused": lambda s: any(ph.expect_failure for ph in s.launches),
    "checkpoint at step 0": lambda s: any(
        (c.step, c.extra) == (0, 0) for ph in s.launches for c in ph.checkpoints
    ),
    "mid-window checkpoint": _mid_window,
    "data that runs out": lambda s: s.launches[-1].steps == RUN_DRY_STEPS,
    "json persistence": lambda s: s.persist_format == "json",
    "torch persistence": lambda s: s.persist_format == "torch",
    "explicit store": lambda s: s.pipeline.aggregation == "store_explicit",
    "directory aggregation": lambda s: s.pipeline.aggregation == "dir",
    "threads runner": lambda s: s.pipeline.runner == "threads",
    "crash then relaunch": lambda s: any(ph.rank_faults for ph in s.launches[:-1]),
    "relaunch from the same checkpoint": lambda s: any(
        ph.rank_faults and s.restore_index(i) is None and 0 < i < len(s.launches) - 1
        for i, ph in enumerate(s.launches)
    ),
}


@pytest.mark.parametrize("feature", sorted(REACHABLE))
def test_the_inproc_strategy_reaches(feature: str) -> None:
    find(scenarios(tier="inproc"), REACHABLE[feature], settings=REACH)


@pytest.mark.parametrize(
    "feature",
    [
        lambda s: s.pipeline.runner == "process",
        lambda s: s.pipeline.mtp_mode,
        lambda s: any(f.action == "sigkill" for ph in s.launches for f in ph.rank_faults),
        lambda s: any(ph.path == "c10d" for ph in s.launches),
        lambda s: any(ph.path == "static" for ph in s.launches),
    ],
    ids=["process-runner", "mtp-mode", "sigkill", "c10d-path", "static-path"],
)
def test_the_torchrun_strategy_reaches_what_only_processes_have(feature) -> None:
    find(scenarios(tier="torchrun"), feature, settings=REACH)


def _link_faults(s: Scenario) -> list[tuple[int, ProxyFault, str]]:
    return [(i, f, ph.retry) for i, ph in enumerate(s.launches) for f in ph.proxy_faults]


STORE_FAULTS = scenarios(tier="torchrun", store_faults=True)


@pytest.mark.parametrize(
    "feature",
    [
        *[lambda s, t=t: any(f.toxic == t for _, f, _ in _link_faults(s)) for t in STORE_TOXICS],
        *[lambda s, r=r: any(x == r for _, _, x in _link_faults(s)) for r in RETRIES[1:]],
        lambda s: any(f.at == "start" for _, f, _ in _link_faults(s)),
        lambda s: any(f.at == "outcome" for _, f, _ in _link_faults(s)),
        lambda s: any(f.at == "ack" for _, f, _ in _link_faults(s)),
        lambda s: bool(_link_faults(s)) and s.pipeline.runner == "process",
        *[
            lambda s, t=t: any(f.toxic == t and f.heals for _, f, _ in _link_faults(s))
            for t in HEALING_TOXICS
        ],
    ],
    ids=[
        *STORE_TOXICS,
        *RETRIES[1:],
        "at-start",
        "at-outcome",
        "at-ack",
        "process-runner",
        *(f"healed-{t}" for t in HEALING_TOXICS),
    ],
)
def test_the_store_fault_strategy_reaches(feature) -> None:
    find(STORE_FAULTS, feature, settings=REACH)


@settings(max_examples=300, deadline=None, database=None)
@given(STORE_FAULTS)
def test_a_link_fault_can_act_where_it_is_placed(scenario: Scenario) -> None:
    """Each fault sits on a rank that writes its point of the round, in a launch that has a
    round and store traffic; a scenario with link faults fails its rounds in seconds."""
    faults = _link_faults(scenario)
    for i, fault, _ in faults:
        ph = scenario.launches[i]
        assert ph.world_size >= 2 and ph.checkpoints and not ph.rank_faults
        restored = any(scenario.restore_index(j) is not None for j in range(i))
        assert not (restored and CheckpointAt(0) in ph.checkpoints)  # refusals restore nothing
        point = fault.at.partition("#")[0]
        if point in ("announce", "outcome"):
            assert fault.rank == 0
        elif point == "ack":
            assert 1 <= fault.rank < ph.world_size
        else:
            assert 0 <= fault.rank < ph.world_size
    for ph in scenario.launches:
        if not ph.proxy_faults and not any(f.at_round for f in ph.rank_faults) and not ph.lags:
            assert ph.retry == "none"
    if faults:
        assert scenario.pipeline.aggregate_timeout_s == STORE_FAULT_TIMEOUT_S
        p = scenario.pipeline
        assert p.aggregation in STORE_AGGREGATIONS
        assert not p.mtp_mode  # the MTP child runs the round (under runner process the rank)


def _point_faults(s: Scenario) -> list[tuple[int, RankFault, str]]:
    return [
        (i, f, ph.retry) for i, ph in enumerate(s.launches) for f in ph.rank_faults if f.at_round
    ]


TORCHRUN = scenarios(tier="torchrun")


@pytest.mark.parametrize(
    "feature",
    [
        *[
            lambda s, a=a: any(f.action == a for _, f, _ in _point_faults(s))
            for a in RANK_POINT_ACTIONS
        ],
        *[
            lambda s, p=p: any(f.at.partition("#")[0] == p for _, f, _ in _point_faults(s))
            for p in ROUND_PHASES
        ],
        lambda s: any(f.at.endswith("#2") for _, f, _ in _point_faults(s)),
        lambda s: any(f.at.startswith("shard") and f.rank == 0 for _, f, _ in _point_faults(s)),
        lambda s: any(f.at.startswith("shard") and f.rank > 0 for _, f, _ in _point_faults(s)),
        lambda s: bool(_point_faults(s)) and s.pipeline.aggregation == "store_explicit",
        *[lambda s, r=r: any(x == r for _, _, x in _point_faults(s)) for r in RETRIES[1:]],
        lambda s: bool(_point_faults(s)) and s.pipeline.runner == "process",
    ],
    ids=[
        *RANK_POINT_ACTIONS,
        *ROUND_PHASES,
        "second-round",
        "leader-shard",
        "follower-shard",
        "explicit-store",
        *RETRIES[1:],
        "process-runner",
    ],
)
def test_the_torchrun_strategy_reaches_rank_faults_at_round_points(feature) -> None:
    find(TORCHRUN, feature, settings=REACH)


@settings(max_examples=300, deadline=None, database=None)
@given(TORCHRUN)
def test_a_round_point_rank_fault_can_fire_where_it_is_placed(scenario: Scenario) -> None:
    """Alone in its launch, on a rank that writes its point, in a round the launch runs,
    through a store the rank's own process writes to, failing its round in seconds."""
    for i, f, _ in _point_faults(scenario):
        ph, p = scenario.launches[i], scenario.pipeline
        point = rank_point(f)
        assert point is not None and ph.rank_faults == (f,) and not ph.proxy_faults
        assert f.action in RANK_POINT_ACTIONS and 1 <= point[1] <= len(ph.checkpoints)
        assert ph.world_size >= 2 and p.aggregation in POINT_AGGREGATIONS
        assert p.aggregation != "dir" or point[0] != "participants"  # no file for it
        assert not p.mtp_mode  # beside dcp too: rank-point-dcp is put back (docs/space.md)
        assert (f.rank == 0) == (point[0] in LEADER_POINTS) or point[0] in ("shard", "participants")
        assert point[0] != "ack" or f.rank > 0
        assert p.aggregate_timeout_s == STORE_FAULT_TIMEOUT_S
    for ph in scenario.launches:
        assert not any(f.action == "sigstop" and not f.at_round for f in ph.rank_faults)


INPROC_LINKS = scenarios(tier="inproc", store_faults=True)


@pytest.mark.parametrize(
    "feature",
    [
        *[
            lambda s, t=t: any(f.toxic == t for ph in s.launches for f in ph.proxy_faults)
            for t in THREAD_TOXICS
        ],
        *[
            lambda s, p=p: any(
                f.action == "raise" and f.at.partition("#")[0] == p for _, f, _ in _point_faults(s)
            )
            for p in ROUND_PHASES
        ],
    ],
    ids=[*THREAD_TOXICS, *(f"raise-at-{p}" for p in ROUND_PHASES)],
)
def test_the_in_process_strategy_reaches_link_faults_and_round_point_raises(feature) -> None:
    """The fast tier searches faults inside a round too (per-rank proxies, the interposer in
    each rank thread), so torchrun's share goes to what only processes can do."""
    find(INPROC_LINKS, feature, settings=REACH)


def test_the_simplest_scenario_is_one_rank_one_lane_one_launch() -> None:
    s = find(scenarios(), lambda s: True, settings=SHRINK)
    assert [ph.world_size for ph in s.launches] == [1]
    assert s.pipeline.canonical_replicas == 1
    assert not any(ph.rank_faults for ph in s.launches)
    assert (s.pipeline.aggregation, s.persist_format, s.pipeline.runner) == (
        "store",
        "pickle",
        "inline",
    )


def test_a_mid_window_resize_shrinks_to_two_launches_of_one_and_two_ranks() -> None:
    """What the planted defect needs: a rank with two lanes, then another world size."""
    s = find(
        scenarios(),
        lambda s: any(a != b and mid for a, b, mid in _resumes(s)),
        settings=SHRINK,
    )
    # Hypothesis may stop at 2 -> 1 over C=3, one move short of 1 -> 2 over C=2 (the
    # explorer's polishing pass makes that move; tests/unit/test_explore.py checks it).
    assert sorted(ph.world_size for ph in s.launches) == [1, 2]
    assert s.pipeline.canonical_replicas <= 3
    assert any(c.extra for ph in s.launches for c in ph.checkpoints)


def test_a_refusal_shrinks_to_two_ranks_over_one_lane() -> None:
    s = find(scenarios(), lambda s: any(ph.expect_failure for ph in s.launches), settings=SHRINK)
    assert [ph.world_size for ph in s.launches] == [2]
    assert s.pipeline.canonical_replicas == 1


def test_a_bad_tier_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown tier 'gpu'"):
        find(scenarios(tier="gpu"), lambda s: True, settings=REACH)  # type: ignore[arg-type]


# --------------------------------------------------------------- Zephon options, profiles

ZEPHON_OPTIONS = ("aggregate_serializer", "aggregate_compressor", "prefetch_batches",
                  "shutdown_mode", "aggregate_timeout_s")
OPTION_VALUES: dict[str, Callable[[Scenario], bool]] = {
    "json serializer": lambda s: s.pipeline.aggregate_serializer == "json",
    "no compressor": lambda s: s.pipeline.aggregate_compressor == "none",
    "no prefetch": lambda s: s.pipeline.prefetch_batches == 0,
    "prefetch 1": lambda s: s.pipeline.prefetch_batches == 1,
    "deep prefetch": lambda s: (s.pipeline.prefetch_batches or 0) > 8,
    "hard shutdown": lambda s: s.pipeline.shutdown_mode == "hard",
    "Zephon's timeout": lambda s: s.pipeline.aggregate_timeout_s == 180.0,
    "plain json persistence": lambda s: s.persist_format == "plain_json",
}


@pytest.mark.parametrize("tier", ["inproc", "torchrun"])
@pytest.mark.parametrize("feature", sorted(OPTION_VALUES))
def test_both_tiers_reach_every_zephon_option_value(tier: str, feature: str) -> None:
    find(scenarios(tier=tier), OPTION_VALUES[feature], settings=REACH)  # type: ignore[arg-type]


def test_only_the_torchrun_tier_draws_dcp_persistence() -> None:
    find(scenarios(tier="torchrun"), lambda s: s.persist_format == "dcp", settings=REACH)
    dcp = PERSIST_FORMATS.index("dcp")
    assert persist_odds("inproc", False, "downstream")[dcp] == 0
    assert persist_odds("torchrun", True, "downstream")[dcp] == 0  # never beside link faults


def test_the_spec_defaults_are_zephons_and_come_first_in_the_value_sets() -> None:
    """So a scenario file written before these fields means what it meant, and shrinking
    (toward the first value) ends at Zephon's behaviour."""
    from zephon.options import RuntimeOptions

    spec, zephon = PipelineSpec(), RuntimeOptions()
    for name, values in [
        ("aggregate_serializer", AGGREGATE_SERIALIZERS),
        ("aggregate_compressor", AGGREGATE_COMPRESSORS),
        ("shutdown_mode", SHUTDOWN_MODES),
    ]:
        assert getattr(spec, name) == getattr(zephon, name) == values[0], name
    assert spec.prefetch_batches is zephon.prefetch_batches is None


@pytest.mark.parametrize(
    ("tier", "profile"),
    [("inproc", "default"), ("torchrun", "default"), ("torchrun", "downstream")],
)
def test_zephon_options_shrink_to_their_defaults(tier: str, profile: str) -> None:
    """Asking for one non-default option leaves every other at its default, and the plainest
    scenario of any profile is the plainest pipeline (inline, store, pickle)."""
    plain = PipelineSpec()
    strategy = scenarios(tier=tier, profile=profile)  # type: ignore[arg-type]
    s = find(strategy, lambda s: s.pipeline.aggregate_compressor == "none", settings=SHRINK)
    for name in ZEPHON_OPTIONS:
        if name != "aggregate_compressor":
            assert getattr(s.pipeline, name) == getattr(plain, name), name
    s = find(strategy, lambda s: True, settings=SHRINK)
    assert (s.pipeline.runner, s.pipeline.mtp_mode, s.pipeline.aggregation) == (
        "inline",
        False,
        "store",
    )
    assert s.persist_format == "pickle"
    assert all(getattr(s.pipeline, n) == getattr(plain, n) for n in ZEPHON_OPTIONS)


def _share(odds: tuple[int, ...], index: int) -> float:
    return odds[index] / sum(odds)


def test_the_downstream_profile_makes_the_downstreams_defaults_common_on_torchrun() -> None:
    """torchtitan-zephon runs worker processes, mtp_mode, torchrun's store and DCP; the
    default profile keeps worker processes rare (a launch of them takes tens of seconds)."""
    assert _share(DOWNSTREAM_RUNNER_ODDS, 2) > 0.5 and _share(TORCHRUN_RUNNER_ODDS, 2) < 0.1
    assert _share(DOWNSTREAM_MTP_ODDS, 1) > 0.5 and _share(TORCHRUN_MTP_ODDS, 1) < 0.1
    assert _share(DOWNSTREAM_AGGREGATION_ODDS, 0) > 0.5
    dcp = PERSIST_FORMATS.index("dcp")
    assert _share(persist_odds("torchrun", False, "downstream"), dcp) >= 0.5
    assert _share(persist_odds("torchrun", False, "default"), dcp) < 0.5
    find(
        scenarios(tier="torchrun", profile="downstream"),
        lambda s: s.pipeline.runner == "process"
        and s.pipeline.mtp_mode
        and s.persist_format == "dcp",
        settings=REACH,
    )


def test_an_unknown_profile_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown profile 'fast'"):
        find(scenarios(profile="fast"), lambda s: True, settings=REACH)  # type: ignore[arg-type]


def _child_faults(s: Scenario) -> list[tuple[int, ChildFault]]:
    return [(i, f) for i, ph in enumerate(s.launches) for f in ph.child_faults]


CHILDREN = scenarios(tier="torchrun", profile="downstream", faults=True)
"""Where worker processes are common: a child fault needs ``runner: process``."""


@pytest.mark.parametrize(
    "feature",
    [
        lambda s: bool(_child_faults(s)),
        lambda s: any(f.at_step < s.launches[i].steps for i, f in _child_faults(s)),
        lambda s: any(f.at_step == s.launches[i].steps for i, f in _child_faults(s)),
    ],
    ids=["any", "mid-launch", "last-step"],
)
def test_the_torchrun_strategy_reaches_child_faults(feature) -> None:
    find(CHILDREN, feature, settings=REACH)


@settings(max_examples=300, deadline=None, database=None)
@given(CHILDREN)
def test_a_child_fault_is_drawn_only_where_it_can_act(scenario: Scenario) -> None:
    """Worker processes without mtp_mode, endless data, lockstep, alone in its launch, on one
    of its ranks; a mid-launch kill leaves its rank CHILD_TAIL_ROWS rows to draw."""
    assert violations(scenario) == [] and scenario.validate() is scenario
    for i, f in _child_faults(scenario):
        ph, p = scenario.launches[i], scenario.pipeline
        assert (p.runner, p.mtp_mode, is_finite(scenario.data)) == ("process", False, False)
        assert not (ph.rank_faults or ph.proxy_faults or ph.store_faults or ph.lags)
        assert ph.sync == "lockstep" and not ph.expect_failure
        assert 0 <= f.rank < ph.world_size and 1 <= f.at_step <= ph.steps
        if f.at_step < ph.steps:
            lanes = lanes_per_rank(ph.world_size, scenario.canonical_replicas(i), p.mapping, ph.tp)
            rows = (ph.steps - f.at_step) * scenario.data.microbatch * lanes[f.rank]
            assert rows >= CHILD_TAIL_ROWS


@pytest.mark.parametrize(
    ("tier", "profile", "faults"),
    [("inproc", "default", True), ("torchrun", "downstream", False)],
    ids=["inproc", "torchrun-without-faults"],
)
def test_no_child_fault_is_drawn_without_processes_of_a_rank_or_faults(
    tier: str, profile: str, faults: bool
) -> None:
    @settings(max_examples=150, deadline=None, database=None)
    @given(scenarios(tier=tier, profile=profile, faults=faults))  # type: ignore[arg-type]
    def check(s: Scenario) -> None:
        assert _child_faults(s) == []

    check()
