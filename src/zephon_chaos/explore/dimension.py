"""One dimension of the declared space, written once: its cells and why each cannot be
reached, where a scenario lands in it, and the aim that lands a launch in one of its cells.

``explore.table`` lists every dimension; the declared space (``space.declare``), landing
(``landing.cells_of``) and aiming (``aiming.targets``) read that table and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from zephon_chaos.aims import Aim, AimKind
from zephon_chaos.dimensions.cells import Cell, Declared, Dim, Why
from zephon_chaos.dimensions.settings import Options, Setting
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario

Declare = Callable[[Options], Iterable[Declared]]
Land = Callable[[Scenario, "ScenarioOutcome | None"], Iterable[Cell]]
AimAt = Callable[[Cell], "Aim | None"]
Reason = Callable[[Options], "Why | None"]


def no_aim(c: Cell) -> Aim | None:
    """A dimension no aim lands in: the strategies reach its cells often enough."""
    return None


@dataclass(frozen=True)
class Dimension:
    """``declare``: every cell of the dimension for a run's options, each with why it cannot be
    reached (None: it can); ``land``: the cells a scenario (and what its run showed, when
    given) exercised; ``aim``: the aim at one of its cells, or None."""

    dim: Dim
    declare: Declare
    land: Land
    aim: AimAt = no_aim


def first(*reasons: Why | None) -> Why | None:
    """The first reason given: a cell has one, the most basic."""
    return next((r for r in reasons if r is not None), None)


def of_setting(s: Setting) -> Dimension:
    """A setting's dimension (``dimensions.settings``): its values' cells, its field's value,
    and an aim at each of its ``aims`` values."""
    aimed = {s.cell(v): Aim(AimKind.SETTING, s.field, s.label(v)) for v in s.aims}

    def land(scenario: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
        yield s.cell(s.get(scenario))

    return Dimension(s.dim, s.declared, land, aimed.get)
