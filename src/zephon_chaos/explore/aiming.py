"""Which cells the search aims at: the reachable ones no tier reached yet, breadth first."""

from __future__ import annotations

from collections.abc import Mapping

from zephon_chaos.aims import CHILD_POINTS, SETTINGS, Aim, AimKind
from zephon_chaos.explore.cells import (
    CHILD_WHEN,
    Cell,
    Dim,
    LayoutChange,
)
from zephon_chaos.explore.space import Space
from zephon_chaos.scenario_rules import (
    RESTART_ACTIONS,
)
from zephon_chaos.strategies import (
    MTP_CHOICES,
    RESTART_CHOICES,
    RUNNER_CHOICES,
)
from zephon_chaos.workload.spec import AT_STEP

LAYOUT_AIMS = {
    LayoutChange.DP_ONLY: "dp-only",
    LayoutChange.TP_ONLY: "tp-only",
    LayoutChange.BOTH: "both",
}
"""Each layout change's pair of layouts (``aims.LAYOUT_PAIRS``)."""
HEAL_RETRY = "lockstep"
"""A heal aim's retry policy: under ``none`` a failed call ends the rank, and no call follows
the heal for the heal oracle to judge."""


def aim_at(c: Cell) -> Aim | None:
    """The aim that lands a launch in fault cell ``c``; None for a cell no aim targets."""
    v = c.value
    if c.dim is Dim.RANK_FAULT_POINT:
        return Aim(AimKind.RANK, v[0], v[1], v[2], v[3])  # type: ignore[arg-type]
    if c.dim is Dim.STORE_FAULT:
        return Aim(AimKind.LINK, v[0], v[1], v[2], v[3])  # type: ignore[arg-type]
    if c.dim is Dim.STORE_FAULT_HEAL:
        # The heal oracle judges the call after the fault's: a lockstep retry is that call.
        return Aim(AimKind.LINK, v[0], v[1], retry=HEAL_RETRY, until=v[2])
    if c.dim is Dim.HOSTED_STORE_FAULT:
        return Aim(AimKind.HOSTED, v[0], v[1], "store_explicit")
    if c.dim is Dim.RANK_FAULT_ROLE:
        return Aim(AimKind.RANK, "raise", v[0], role=v[1])  # type: ignore[arg-type]
    if c.dim is Dim.STORE_FAULT_ROLE:
        return Aim(AimKind.LINK, "latency", v[0], role=v[1])  # type: ignore[arg-type]
    if c.dim is Dim.LAG:
        return Aim(AimKind.LAG, retry=v[1], role=v[0])  # type: ignore[arg-type]
    if c.dim is Dim.RESTARTS and v[0] != str(RESTART_CHOICES[0]):
        return Aim(AimKind.RESTART, RESTART_ACTIONS[1], AT_STEP)
    if c.dim is Dim.CHILD_FAULT:
        return Aim(AimKind.CHILD, v[0], CHILD_POINTS[v[1] == CHILD_WHEN[1]])
    if c.dim is Dim.LAYOUT_CHANGE:
        return Aim(AimKind.LAYOUT, LAYOUT_AIMS[LayoutChange(v[0])])
    if c.dim is Dim.MTP and v[0] == MTP_CHOICES[1]:
        return Aim(AimKind.SETTING, SETTINGS[0])
    if c.dim is Dim.RUNNER and v[0] == RUNNER_CHOICES[2]:
        return Aim(AimKind.SETTING, SETTINGS[1])
    return None


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
