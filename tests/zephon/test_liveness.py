"""Zephon's timing promises measured on a real failed round (torchrun, a store-link fault).

Rank 1's link to the store goes down right before its second shard write; under a lockstep
retry every rank stays alive until both attempts have failed, so each rank's checkpoint end
is on record. The liveness oracle (run by the runner on every launch) must have measured how
long after rank 1's failure the leader's checkpoint() ended, within its bound, and judged
every other blocking step; rank 1, cut off from the store, is no propagation measurement.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zephon_chaos.nemeses.store_proxies import DOWN
from zephon_chaos.oracles.liveness import Effect, LivenessBounds, Stall, Step
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0


def test_the_liveness_oracle_measures_a_real_failed_round(
    resume_check, record_property: Callable[[str, object], None]
) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S),
        launches=(
            Launch(
                2,
                3,
                (CheckpointAt(1), CheckpointAt(2)),
                proxy_faults=(ProxyFault(1, DOWN, at="shard#2"),),
                retry="lockstep",
            ),
            Launch(2, 2),
        ),
        name="liveness-cut",
    )
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    verdict = outcome.phases[0].liveness
    assert verdict is not None and verdict.ok, verdict
    assert [(s.rank, s.effect) for s in verdict.stalls] == [(1, Effect.CUT)], verdict.stalls
    assert isinstance(verdict.stalls[0], Stall) and verdict.stalls[0].since is not None

    first = next(p for p in verdict.propagations if (p.index, p.attempt) == (1, 1))
    assert first.first_rank == 1, first  # the cut rank fails at its own shard write
    bound = LivenessBounds().propagation_bound_s(TIMEOUT_S)
    lag = first.lags[0]
    record_property("leader_lag_s", round(lag, 3))
    # The leader learns of a follower's failure only when its own budget runs out (followers
    # publish no failure notice): it ends later, but within T + 3 s.
    assert 0.0 < lag <= bound, (lag, bound)

    attempts = [t for t in verdict.timings if t.step is Step.CHECKPOINT and t.index == 1]
    assert sorted((t.rank, t.attempt, t.ok) for t in attempts) == [
        (0, 1, False),
        (0, 2, False),
        (1, 1, False),
        (1, 2, False),
    ]
    assert len(verdict.waits(Step.FETCH)) >= 2 * 2, "each rank fetched before the fault"
    resumed = outcome.phases[1].liveness
    assert resumed is not None and resumed.ok and len(resumed.waits(Step.RESTORE)) == 2
