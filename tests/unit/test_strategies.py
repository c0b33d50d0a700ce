"""The scenario strategies: always valid, cover what users reach, shrink to the simplest."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from zephon_chaos.inproc import inproc_refusal
from zephon_chaos.scenario import ProxyFault, Scenario
from zephon_chaos.scenario_rules import normalised, violations
from zephon_chaos.strategies import (
    REFUSAL_ERROR,
    RUN_DRY_STEPS,
    STORE_FAULT_TIMEOUT_S,
    STORE_TOXICS,
    lanes_per_rank,
    scenarios,
)
from zephon_chaos.workload.spec import RETRIES, CheckpointAt

SHRINK = settings(
    database=None, max_examples=3000, suppress_health_check=list(HealthCheck), deadline=None
)
REACH = settings(SHRINK, phases=[Phase.generate])
"""Reaching a feature needs no shrinking: the first example that has it will do."""


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.sampled_from(("inproc", "torchrun", "torchrun+store-faults")).flatmap(
        lambda t: scenarios(tier=t.split("+")[0], store_faults=t.endswith("faults"))  # type: ignore[arg-type]
    )
)
def test_every_generated_scenario_is_valid_and_round_trips(scenario: Scenario) -> None:
    assert Scenario.from_json(scenario.to_json()) == scenario
    for i, ph in enumerate(scenario.phases):
        refused = ph.world_size > scenario.canonical_replicas(i)
        assert refused == ph.expect_failure
        if refused:
            assert ph.expect_error == REFUSAL_ERROR


SPACES = st.tuples(
    st.sampled_from(("inproc", "torchrun", "torchrun+store-faults")), st.integers(1, 5)
)


@settings(max_examples=300, deadline=None, database=None)
@given(
    SPACES.flatmap(
        lambda space: scenarios(
            tier=space[0].split("+")[0],  # type: ignore[arg-type]
            store_faults=space[0].endswith("faults"),
            max_world=space[1],
        )
    )
)
def test_every_generated_scenario_obeys_the_one_validity_model(scenario: Scenario) -> None:
    """Both tiers, with and without link faults, any max_world: nothing validation refuses,
    and nothing normalising would change (generation builds through the same rules)."""
    assert violations(scenario) == []
    assert normalised(scenario) == scenario
    assert scenario.validate() is scenario


@settings(max_examples=150, deadline=None, database=None)
@given(scenarios(tier="inproc"))
def test_the_in_process_tier_gets_only_what_threads_can_run(scenario: Scenario) -> None:
    assert inproc_refusal(scenario) is None


def _resumes(s: Scenario) -> list[tuple[int, int, bool]]:
    """(from, to, mid-window) of every launch that restores a checkpoint."""
    out, taken = [], None
    for i, ph in enumerate(s.phases):
        if ph.expect_failure:
            continue
        if taken is not None:
            out.append((taken[0], ph.world_size, taken[1]))
        k = s.restore_index(i)
        if k is not None:
            taken = (ph.world_size, _is_mid_window(s, i, k))
    return out


def _is_mid_window(s: Scenario, i: int, k: int) -> bool:
    ph = s.phases[i]
    _, extra = sorted({(c.step, c.extra) for c in ph.checkpoints})[k]
    per = lanes_per_rank(ph.world_size, s.canonical_replicas(i), s.pipeline.mapping)
    return any(0 < min(extra, p) < p for p in per)


def _mid_window(s: Scenario) -> bool:
    return any(
        0 < c.extra < max(lanes_per_rank(ph.world_size, s.canonical_replicas(i), "contiguous"))
        for i, ph in enumerate(s.phases)
        if not ph.expect_failure
        for c in ph.checkpoints
    )


REACHABLE: dict[str, Callable[[Scenario], bool]] = {
    "five launches": lambda s: len(s.phases) == 5,
    "the same size again": lambda s: any(a == b for a, b, _ in _resumes(s)),
    "growth": lambda s: any(a < b for a, b, _ in _resumes(s)),
    "shrink": lambda s: any(a > b for a, b, _ in _resumes(s)),
    "G not dividing C": lambda s: any(
        s.pipeline.canonical_replicas % ph.world_size for ph in s.phases if not ph.expect_failure
    ),
    "G > C refused": lambda s: any(ph.expect_failure for ph in s.phases),
    "checkpoint at step 0": lambda s: any(
        (c.step, c.extra) == (0, 0) for ph in s.phases for c in ph.checkpoints
    ),
    "mid-window checkpoint": _mid_window,
    "data that runs out": lambda s: s.phases[-1].steps == RUN_DRY_STEPS,
    "json persistence": lambda s: s.persist_format == "json",
    "torch persistence": lambda s: s.persist_format == "torch",
    "explicit store": lambda s: s.pipeline.aggregation == "store_explicit",
    "directory aggregation": lambda s: s.pipeline.aggregation == "dir",
    "threads runner": lambda s: s.pipeline.runner == "threads",
    "crash then relaunch": lambda s: any(ph.rank_faults for ph in s.phases[:-1]),
    "relaunch from the same checkpoint": lambda s: any(
        ph.rank_faults and s.restore_index(i) is None and 0 < i < len(s.phases) - 1
        for i, ph in enumerate(s.phases)
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
        lambda s: any(f.action == "sigkill" for ph in s.phases for f in ph.rank_faults),
        lambda s: any(ph.launch == "c10d" for ph in s.phases),
        lambda s: any(ph.launch == "static" for ph in s.phases),
    ],
    ids=["process-runner", "mtp-mode", "sigkill", "c10d-path", "static-path"],
)
def test_the_torchrun_strategy_reaches_what_only_processes_have(feature) -> None:
    find(scenarios(tier="torchrun"), feature, settings=REACH)


def _link_faults(s: Scenario) -> list[tuple[int, ProxyFault, str]]:
    return [(i, f, ph.retry) for i, ph in enumerate(s.phases) for f in ph.proxy_faults]


STORE_FAULTS = scenarios(tier="torchrun", store_faults=True)


@pytest.mark.parametrize(
    "feature",
    [
        *[lambda s, t=t: any(f.toxic == t for _, f, _ in _link_faults(s)) for t in STORE_TOXICS],
        *[lambda s, r=r: any(x == r for _, _, x in _link_faults(s)) for r in RETRIES[1:]],
        lambda s: any(f.at == "start" for _, f, _ in _link_faults(s)),
        lambda s: any(f.at == "outcome" for _, f, _ in _link_faults(s)),
        lambda s: any(f.at == "ack" for _, f, _ in _link_faults(s)),
    ],
    ids=[*STORE_TOXICS, *RETRIES[1:], "at-start", "at-outcome", "at-ack"],
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
        ph = scenario.phases[i]
        assert ph.world_size >= 2 and ph.checkpoints and not ph.rank_faults
        assert not (i > 0 and CheckpointAt(0) in ph.checkpoints)
        point = fault.at.partition("#")[0]
        if point in ("announce", "outcome"):
            assert fault.rank == 0
        elif point == "ack":
            assert 1 <= fault.rank < ph.world_size
        else:
            assert 0 <= fault.rank < ph.world_size
    assert all(ph.retry == "none" for ph in scenario.phases if not ph.proxy_faults)
    if faults:
        assert scenario.pipeline.aggregate_timeout_s == STORE_FAULT_TIMEOUT_S
        p = scenario.pipeline
        assert p.aggregation == "store" and p.runner != "process" and not p.mtp_mode


def test_store_faults_need_the_torchrun_tier() -> None:
    with pytest.raises(ValueError, match="store_faults need the torchrun tier"):
        find(scenarios(tier="inproc", store_faults=True), lambda s: True, settings=REACH)


def test_the_simplest_scenario_is_one_rank_one_lane_one_launch() -> None:
    s = find(scenarios(), lambda s: True, settings=SHRINK)
    assert [ph.world_size for ph in s.phases] == [1]
    assert s.pipeline.canonical_replicas == 1
    assert not any(ph.rank_faults for ph in s.phases)
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
    assert sorted(ph.world_size for ph in s.phases) == [1, 2]
    assert s.pipeline.canonical_replicas <= 3
    assert any(c.extra for ph in s.phases for c in ph.checkpoints)


def test_a_refusal_shrinks_to_two_ranks_over_one_lane() -> None:
    s = find(scenarios(), lambda s: any(ph.expect_failure for ph in s.phases), settings=SHRINK)
    assert [ph.world_size for ph in s.phases] == [2]
    assert s.pipeline.canonical_replicas == 1


def test_a_bad_tier_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown tier 'gpu'"):
        find(scenarios(tier="gpu"), lambda s: True, settings=REACH)  # type: ignore[arg-type]
