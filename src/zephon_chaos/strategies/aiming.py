"""Drawing which launches of a scenario aim at which fault cells (``zephon_chaos.aims``)."""

from __future__ import annotations

from hypothesis import strategies as st

from zephon_chaos.aims import WORKER_PROCESS_COST, Aim, AimKind, Draws, aimed
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies.values import LATENCIES_MS, STALLS_S, ints, one_of, weighted

AIM_CHOICES = ("free", "aimed")
AIM_ODDS = (1, 1)
"""With aims, free and aimed scenarios (``zephon_chaos.aims``); the explorer aims whole
rounds (``explore.config.AIMED_ODDS``) and shares its time between them and plain ones."""
MORE_AIM_ODDS = (1, 3)
"""Each other launch of an aimed scenario: aimed as well, three times in four (more cells a
scenario: its reference run and start are paid once)."""


def aim(
    draw: st.DrawFn, scenario: Scenario, aims: tuple[Aim, ...], odds: tuple[int, int]
) -> Scenario:
    """``scenario`` with one launch (drawn) aimed at one of ``aims``, and each other launch,
    three times in four, at one of the aims of the same aggregation (one pipeline serves all).
    A setting aim (``mtp_mode``, a process runner) or a layout aim is the scenario's only one."""
    if draw(weighted(AIM_CHOICES, odds)) == AIM_CHOICES[0]:
        return scenario
    first = one_aim(draw, aims)
    if first.kind in WHOLE_SCENARIO_AIMS:
        return aimed(scenario, 0, first, Draws(rank=draw(ints(0, 3))))
    same = tuple(
        a for a in aims if a.aggregation == first.aggregation and a.kind not in WHOLE_SCENARIO_AIMS
    )
    where = draw(ints(0, len(scenario.launches) - 1))
    for i in range(len(scenario.launches)):
        aim: Aim | None = first
        if i != where:
            more = draw(weighted(AIM_CHOICES, MORE_AIM_ODDS)) != AIM_CHOICES[0]
            aim = one_aim(draw, same) if more else None
        draws = Draws(
            rank=draw(ints(0, 3)),
            latency_ms=draw(one_of(LATENCIES_MS)),
            stall_s=draw(one_of(STALLS_S)),
        )
        if aim is not None:
            scenario = aimed(scenario, i, aim, draws)
    return scenario


WHOLE_SCENARIO_AIMS = (AimKind.SETTING, AimKind.LAYOUT, AimKind.CHILD)
"""Aims that set the scenario's pipeline or its launches' layouts, not one launch's fault."""


def one_aim(draw: st.DrawFn, aims: tuple[Aim, ...]) -> Aim:
    """A group of ``aims`` (``Aim.group``) by :func:`group_odds`, then one of its aims."""
    odds = group_odds(aims)
    group = draw(weighted(tuple(odds), tuple(odds.values())))
    return draw(st.sampled_from(tuple(a for a in aims if a.group == group)))


MIN_GROUP_CELLS = 8
"""A group of aims is drawn as if it had at least this many cells: the one cell of a setting
would otherwise get one aimed draw in hundreds, and its defects (worker processes, mtp_mode)
need a few aimed scenarios a run."""
COST_SCALE = WORKER_PROCESS_COST
"""Every ``Aim.cost`` divides it: the odds stay integers."""


def group_odds(aims: tuple[Aim, ...]) -> dict[tuple[str, ...], int]:
    """Each group's odds, in the order ``aims`` first name it: its cells (at least
    ``MIN_GROUP_CELLS``) over what landing one costs (``Aim.cost``). An aimed round's time then
    goes to each group about as its cells ask, and a slow cell costs no more than a fast one:
    drawn evenly by group, a torchrun tier's aimed time went mostly to the few cells of worker
    processes and stalls, while 94 cells of a rank's signals stayed empty over three seeds."""
    cells: dict[tuple[str, ...], list[Aim]] = {}
    for a in aims:
        cells.setdefault(a.group, []).append(a)
    return {
        g: max(len(members), MIN_GROUP_CELLS) * (COST_SCALE // max(a.cost for a in members))
        for g, members in cells.items()
    }
