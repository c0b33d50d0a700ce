"""The table of dimensions: a setting added as one entry is drawn by the strategies, judged by
the rules, declared and counted by the coverage, and aimed at (docs/architecture.md, "One
table of dimensions", shows the same entry)."""

from __future__ import annotations

from enum import Enum

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephon_chaos.aims import Aim, AimKind, Draws, aimed
from zephon_chaos.dimensions import settings as table
from zephon_chaos.dimensions.cells import Dim, Why, cell
from zephon_chaos.dimensions.settings import Odds, Setting
from zephon_chaos.explore.aiming import aim_at, targets
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.space import declare
from zephon_chaos.explore.table import table as dimensions
from zephon_chaos.scenario import Launch, Scenario, ScenarioError
from zephon_chaos.strategies import scenarios


class Toy(Enum):
    """A dimension of the test's own (a real one is a member of ``Dim``)."""

    BACKEND = "process-group backend"


TOY = Setting(
    Toy.BACKEND,  # type: ignore[arg-type]
    "scenario",
    "backend",
    ("gloo", "nccl"),
    Odds((1, 1), inproc=(1, 0)),
    aims=("nccl",),
)
"""The toy: ``Scenario.backend`` drawn (the strategies never draw it: CI has no GPU), with
no nccl for rank threads, and an aim at nccl."""

NCCL = cell(Toy.BACKEND, "nccl")  # type: ignore[arg-type]
GLOO = cell(Toy.BACKEND, "gloo")  # type: ignore[arg-type]
DRAWS = settings(max_examples=40, deadline=None, database=None, derandomize=True)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Setting:
    monkeypatch.setattr(table, "SETTINGS", (*table.SETTINGS, TOY))
    return TOY


def test_the_strategies_draw_an_added_setting_by_its_odds(toy: Setting) -> None:
    drawn: dict[str, set[str]] = {"torchrun": set(), "inproc": set()}

    @DRAWS
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        for tier, seen in drawn.items():
            seen.add(data.draw(scenarios(tier=tier, max_phases=2)).backend)  # type: ignore[arg-type]

    draw()
    assert drawn == {"torchrun": {"gloo", "nccl"}, "inproc": {"gloo"}}


def test_the_rules_judge_an_added_settings_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The validity model checks every drawn scenario: a value it refuses is refused, naming
    the setting's field."""
    mpi = Setting(Toy.BACKEND, "scenario", "backend", ("mpi",))  # type: ignore[arg-type]
    monkeypatch.setattr(table, "SETTINGS", (*table.SETTINGS, mpi))

    @settings(max_examples=1, deadline=None, database=None)
    @given(s=scenarios(tier="torchrun", max_phases=1))
    def draw(s: Scenario) -> None:
        pass

    with pytest.raises(ScenarioError, match="backend"):
        draw()


def test_the_coverage_declares_and_counts_an_added_setting(toy: Setting) -> None:
    assert {GLOO, NCCL} <= set(declare("torchrun").reachable())
    inproc = declare("inproc")
    assert inproc.why_not(NCCL) is Why.NO_ODDS and GLOO in inproc.reachable()
    scenario = Scenario(launches=(Launch(world_size=2, steps=1),), backend="nccl")
    assert NCCL in cells_of(scenario, None)
    assert GLOO not in cells_of(scenario, None)


def test_an_added_setting_is_aimed_at_and_its_aim_lands(toy: Setting) -> None:
    aim = aim_at(NCCL)
    assert aim == Aim(AimKind.SETTING, "backend", "nccl")
    assert (NCCL, aim) in targets(declare("torchrun"), {})
    assert NCCL not in dict(targets(declare("torchrun"), {NCCL: 1}))
    scenario = Scenario(launches=(Launch(world_size=2, steps=1),))
    assert aimed(scenario, 0, aim, Draws()).backend == "nccl"


def test_every_dimension_has_one_entry_but_the_deployments_fields() -> None:
    """One entry a dimension; the deployment's four fields share one dimension."""
    dims = [d.dim for d in dimensions()]
    assert set(dims) == set(Dim)
    assert [d for d in Dim if dims.count(d) > 1] == [Dim.DEPLOYMENT]


@pytest.mark.parametrize("tier", ["inproc", "torchrun"])
def test_a_drawn_scenario_lands_in_declared_cells_only(tier: str) -> None:
    space = declare(tier, store_faults=True)

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(s=scenarios(tier=tier, store_faults=True))  # type: ignore[arg-type]
    def check(s: Scenario) -> None:
        assert all(c in space for c in cells_of(s, None))

    check()
