"""The declared cells of child faults: reachable on torchrun with faults only, where a kill
lands, and the aim at each cell, which lands back in it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.test_scenario import workers_killed
from zephon_chaos.aims import CHILD_POINTS, AimKind, Draws, aimed
from zephon_chaos.dimensions.cells import CHILD_WHEN, Cell, Dim, Why, cell
from zephon_chaos.explore.aiming import aim_at
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.space import declare
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import normalised
from zephon_chaos.workload.spec import CHILD_TARGETS, CheckpointAt, ChildFault, PipelineSpec

CHILD_CELLS = [cell(Dim.CHILD_FAULT, t, w) for t in CHILD_TARGETS for w in CHILD_WHEN]


def _children(cells: set[Cell]) -> set[Cell]:
    return {c for c in cells if c.dim is Dim.CHILD_FAULT}


@pytest.mark.parametrize(
    ("tier", "faults", "profile", "why"),
    [
        ("torchrun", True, "default", None),
        ("torchrun", True, "downstream", None),
        ("inproc", True, "default", Why.THREADS_NO_CHILDREN),
        ("inproc", False, "default", Why.THREADS_NO_CHILDREN),
        ("torchrun", False, "default", Why.FAULTS_OFF),
    ],
)
@pytest.mark.parametrize("the_cell", CHILD_CELLS, ids=str)
def test_child_fault_cells_are_reachable_on_torchrun_with_faults_only(
    the_cell: Cell, tier: str, faults: bool, profile: str, why: Why | None
) -> None:
    """Rank threads share one process (no rank has workers of its own); faults off, none."""
    s = declare(tier, faults=faults, profile=profile)
    assert the_cell in s
    assert s.why_not(the_cell) is why


@pytest.mark.parametrize(
    ("fault", "steps", "when"),
    [
        (ChildFault(1, 2), None, CHILD_WHEN[0]),
        (ChildFault(0, 1), None, CHILD_WHEN[0]),
        (ChildFault(1, 3), 3, CHILD_WHEN[1]),
    ],
    ids=["mid-launch", "first-step", "last-step"],
)
def test_a_kill_lands_in_the_cell_of_when_it_fires(
    fault: ChildFault, steps: int | None, when: str
) -> None:
    scenario = workers_killed(fault, steps).validate()
    assert _children(cells_of(scenario, None)) == {cell(Dim.CHILD_FAULT, fault.target, when)}


def test_a_scenario_without_a_kill_lands_in_no_child_fault_cell() -> None:
    scenario = workers_killed()
    spared = scenario.with_(
        launches=tuple(replace(ph, child_faults=()) for ph in scenario.launches)
    )
    assert _children(cells_of(spared, None)) == set()


@pytest.mark.parametrize("the_cell", CHILD_CELLS, ids=str)
def test_the_aim_at_a_child_fault_cell_is_a_child_aim_that_lands_in_it(the_cell: Cell) -> None:
    aim = aim_at(the_cell)
    assert aim is not None and aim.kind is AimKind.CHILD
    target, when = the_cell.value
    assert (aim.action, aim.point) == (target, CHILD_POINTS[CHILD_WHEN.index(when)])
    drawn = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2), launches=(Launch(2, 3, (CheckpointAt(1),)),)
    )
    scenario = normalised(aimed(drawn, 0, aim, Draws(rank=1))).validate()
    assert _children(cells_of(scenario, None)) == {the_cell}
