"""How generated ranks arrive at checkpoints: lockstep first; on torchrun free-running, with a
deliberate lag and each policy after it; in process neither (rank threads meet in lockstep)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from zephon_chaos.scenario import Scenario
from zephon_chaos.scenario_rules import violations
from zephon_chaos.strategies import LAG_RETRIES, STORE_FAULT_TIMEOUT_S, scenarios

REACH = settings(
    database=None,
    max_examples=3000,
    suppress_health_check=list(HealthCheck),
    deadline=None,
    phases=[Phase.generate],
)


def _lagged(s: Scenario) -> list[tuple[int, str]]:
    return [(lag.rank, ph.retry) for ph in s.launches for lag in ph.lags]


@pytest.mark.parametrize(
    "feature",
    [
        lambda s: any(ph.sync == "free" and not ph.lags for ph in s.launches),
        *[lambda s, r=r: any(x == r for _, x in _lagged(s)) for r in LAG_RETRIES],
        lambda s: any(rank == 0 for rank, _ in _lagged(s)),
        lambda s: any(rank != 0 for rank, _ in _lagged(s)),
    ],
    ids=["free", *(f"lag-{r}" for r in LAG_RETRIES), "late-leader", "late-follower"],
)
def test_the_torchrun_strategy_reaches(feature) -> None:
    find(scenarios(tier="torchrun"), feature, settings=REACH)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(scenarios(tier="inproc"))
def test_in_process_ranks_always_arrive_in_lockstep(scenario: Scenario) -> None:
    assert all(ph.sync == "lockstep" and not ph.lags for ph in scenario.launches)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(scenarios(tier="torchrun"))
def test_a_lagged_scenario_obeys_the_rules_and_fails_its_round_in_seconds(s: Scenario) -> None:
    assert violations(s) == []
    if any(ph.lags for ph in s.launches):
        assert s.pipeline.aggregate_timeout_s == STORE_FAULT_TIMEOUT_S
    for ph in s.launches:
        assert not ph.lags or (ph.sync == "free" and ph.world_size >= 2)
        assert ph.sync == "lockstep" or ph.world_size >= 2


@pytest.mark.parametrize(
    "feature",
    [
        lambda s: any(ph.retry == "independent" and ph.lags for ph in s.launches),
        lambda s: any(lag.by >= 1 for ph in s.launches for lag in ph.lags),
        lambda s: any(
            lag.by >= 1 and ph.retry == "independent" for ph in s.launches for lag in ph.lags
        ),
    ],
    ids=["independent-beside-a-lag", "drift", "drift-retrying-alone"],
)
def test_the_torchrun_strategy_reaches_drift_and_ranks_retrying_alone(feature) -> None:
    find(scenarios(tier="torchrun"), feature, settings=REACH)
