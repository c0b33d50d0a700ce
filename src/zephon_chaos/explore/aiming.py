"""Which cells the search aims at: the reachable ones no tier reached yet."""

from __future__ import annotations

from collections.abc import Mapping

from zephon_chaos.aims import Aim
from zephon_chaos.dimensions.cells import Cell
from zephon_chaos.explore.space import Space
from zephon_chaos.explore.table import table


def aim_at(c: Cell) -> Aim | None:
    """The aim that lands a launch in cell ``c`` (its dimension's, ``explore.table``); None
    for a cell no aim targets."""
    return next((a for dim in table() if dim.dim is c.dim and (a := dim.aim(c))), None)


def aims(space: Space, counts: Mapping[Cell, int]) -> tuple[Aim, ...]:
    """The aims of :func:`targets`, without their cells."""
    return tuple(a for _, a in targets(space, counts))


def targets(space: Space, counts: Mapping[Cell, int]) -> tuple[tuple[Cell, Aim], ...]:
    """The reachable fault cells ``counts`` never reached, each with its aim, in declaration
    order so that a round's draws are reproducible; none once every one was reached (the
    search then draws as the strategies' odds fall, steered by ``target()`` alone).

    Every hole, whether or not its group has a cell reached: the strategies weigh the groups
    by their cells and cost (``strategies.aiming.group_odds``). Aiming only at groups with no
    cell reached (breadth first) sent a torchrun tier's aimed rounds, once its cheap groups
    had a cell each, to worker processes and stalls alone (20 s to a minute a cell), while
    rank faults' cells (3 s each) stayed empty: 94 of them over three 15-minute seeds."""
    return tuple(
        (c, a) for c in space.reachable() if (a := aim_at(c)) is not None and not counts.get(c, 0)
    )
