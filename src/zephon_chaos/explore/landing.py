"""Where a scenario lands in the declared space (its cells), and how rare that is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zephon_chaos.dimensions.cells import Cell
from zephon_chaos.explore.space import Space
from zephon_chaos.explore.table import table
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario


def cells_of(scenario: Scenario, outcome: ScenarioOutcome | None) -> set[Cell]:
    """The cells ``scenario`` (and what its run showed) exercised, each once: every
    dimension's (``explore.table``)."""
    return {c for dim in table() for c in dim.land(scenario, outcome)}


def rarity(cells: Iterable[Cell], counts: Mapping[Cell, int], space: Space | None) -> float:
    """How rare the rarest of ``cells`` is under ``counts``: 1 / (1 + its count), over the
    reachable cells. The rarest, not a sum: a sum would favour scenarios with more cells,
    that is longer ones, and slow the search down."""
    return max(
        (
            1.0 / (1 + counts.get(c, 0))
            for c in cells
            if space is None or (c in space and space.why_not(c) is None)
        ),
        default=0.0,
    )
