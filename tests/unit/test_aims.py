"""Aims: an aimed launch lands in its fault cell, and the search aims at what it reached least."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephon_chaos.aims import SETTING_LAUNCHES, Aim, AimKind
from zephon_chaos.explore.space import Cell, aim_at, aims, cells_of, declare
from zephon_chaos.scenario import Scenario
from zephon_chaos.scenario_rules import violations
from zephon_chaos.strategies import scenarios

ALWAYS = (0, 1)
"""Aim odds (free, aimed) that aim every scenario."""


def _aimable(tier: str) -> list[Cell]:
    space = declare(tier, store_faults=True)
    return [c for c in space.reachable() if aim_at(c) is not None]


@pytest.mark.parametrize("tier", ["inproc", "torchrun"])
def test_every_reachable_fault_cell_has_an_aim(tier: str) -> None:
    cells = _aimable(tier)
    dims = {c.dim for c in cells}
    assert len(cells) > 100, cells  # the four-way products are there
    assert len(dims) >= 4, dims


@pytest.mark.parametrize("tier", ["inproc", "torchrun"])
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_an_aimed_scenario_lands_in_its_cell_and_is_valid(tier: str, data: st.DataObject) -> None:
    cells = _aimable(tier)
    # A group first, as the strategies draw: each kind of aim gets its share of examples.
    groups = sorted({_group(c) for c in cells})
    group = data.draw(st.sampled_from(groups), label="group")
    cell = data.draw(st.sampled_from([c for c in cells if _group(c) == group]), label="cell")
    aim = aim_at(cell)
    assert aim is not None
    scenario = data.draw(
        scenarios(tier=tier, store_faults=True, aims=(aim,), aim_odds=ALWAYS),  # type: ignore[arg-type]
        label="scenario",
    )
    assert cell in cells_of(scenario, None), scenario
    assert violations(scenario) == []


def test_aims_name_the_cells_never_reached_and_end_once_all_were() -> None:
    space = declare("inproc", store_faults=True)
    cells = _aimable("inproc")
    counts = {c: 1 for c in cells}
    holes = [cells[3], cells[40]]
    for c in holes:
        counts[c] = 0
    assert aims(space, counts) == tuple(aim_at(c) for c in holes)
    counts.update({c: 1 for c in holes})
    assert aims(space, counts) == ()


def test_aims_go_to_kinds_of_fault_never_reached_first() -> None:
    space = declare("torchrun", store_faults=True)
    cells = _aimable("torchrun")
    sigstops = [c for c in cells if _group(c) == ("rank fault", "sigstop")]
    hosted = [c for c in cells if _group(c)[0] == "hosted store fault"]
    assert len(sigstops) > 20 and len(hosted) >= 3
    # One sigstop cell reached: sigstop is touched, every hosted-store action is not.
    counts = {sigstops[0]: 1}
    firsts = aims(space, counts)
    assert firsts and {a.group for a in firsts} == {
        g for c in cells if not counts.get(c) and (g := _group(c)) != ("rank fault", "sigstop")
    }
    assert all(a.group != ("rank fault", "sigstop") for a in firsts)
    # Once every group has a cell reached, every hole is aimed at.
    touched = {}
    for c in cells:
        touched.setdefault(_group(c), c)
    counts = {c: 1 for c in touched.values()}
    assert aims(space, counts) == tuple(aim_at(c) for c in cells if c not in counts)


@pytest.mark.parametrize("setting", ["mtp", "process"])
def test_a_setting_aim_keeps_two_launches(setting: str) -> None:
    aim = Aim(AimKind.SETTING, setting)
    fault = aim_at(_aimable("torchrun")[0])
    assert fault is not None

    @settings(max_examples=30, deadline=None, database=None)
    @given(s=scenarios(tier="torchrun", store_faults=True, aims=(aim, fault), aim_odds=ALWAYS))
    def check(s: Scenario) -> None:
        assert violations(s) == []
        # A fault aim turns both settings off: either is on only when the setting was aimed.
        if s.pipeline.mtp_mode or s.pipeline.runner == "process":
            assert len(s.phases) <= SETTING_LAUNCHES

    check()


def _group(c: Cell) -> tuple[str, ...]:
    aim = aim_at(c)
    assert aim is not None
    return aim.group


def test_a_space_without_fault_cells_has_no_aims() -> None:
    space = declare("inproc", faults=False, store_faults=False)
    assert aims(space, {}) == ()
