"""The declared cells of how ranks arrive: sync and lags, reachable on torchrun only."""

from __future__ import annotations

from zephon_chaos.dimensions.cells import Dim, Why, cell
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.space import declare
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankLag


def test_free_running_and_lags_are_holes_in_process_with_their_reason() -> None:
    inproc, torchrun = declare("inproc"), declare("torchrun")
    assert inproc.why_not(cell(Dim.SYNC, "free")) is Why.THREADS_START_TOGETHER
    assert inproc.why_not(cell(Dim.LAG, "follower", "skip")) is Why.THREADS_START_TOGETHER
    assert inproc.why_not(cell(Dim.SYNC, "lockstep")) is None
    assert torchrun.why_not(cell(Dim.SYNC, "free")) is None
    assert torchrun.why_not(cell(Dim.LAG, "leader", "none")) is None
    assert declare("torchrun", max_world=1).why_not(cell(Dim.SYNC, "free")) is Why.LAG_NEEDS_TWO


def test_a_lagged_launch_lands_on_its_sync_and_lag_cells() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(
            Launch(2, 2, (CheckpointAt(1), CheckpointAt(2)), sync="free", lags=(RankLag(1),),
                  retry="skip"),
            Launch(2, 1),
        ),
    )
    cells = cells_of(scenario, None)
    assert {cell(Dim.SYNC, "free"), cell(Dim.SYNC, "lockstep")} <= cells
    assert cell(Dim.LAG, "follower", "skip") in cells


def test_a_drift_lands_on_its_cell_and_beside_an_agreement_is_a_hole() -> None:
    torchrun = declare("torchrun")
    assert torchrun.why_not(cell(Dim.DRIFT, "independent")) is None
    assert torchrun.why_not(cell(Dim.DRIFT, "skip")) is Why.DRIFT_DEADLOCKS
    assert torchrun.why_not(cell(Dim.LAG, "follower", "independent")) is None
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(
            Launch(
                2,
                3,
                (CheckpointAt(1), CheckpointAt(2), CheckpointAt(3)),
                sync="free",
                lags=(RankLag(1, by=1),),
                retry="independent",
            ),
        ),
    )
    cells = cells_of(scenario, None)
    assert {cell(Dim.DRIFT, "independent"), cell(Dim.LAG, "follower", "independent")} <= cells
