"""Drawing which launches of a scenario aim at which fault cells (``zephon_chaos.aims``)."""

from __future__ import annotations

from hypothesis import strategies as st

from zephon_chaos.aims import Aim, AimKind, Draws, aimed
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
    where = draw(ints(0, len(scenario.phases) - 1))
    for i in range(len(scenario.phases)):
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
    """A group of ``aims`` evenly (``Aim.group``), then one of its aims."""
    groups = tuple(dict.fromkeys(a.group for a in aims))
    group = draw(st.sampled_from(groups))
    return draw(st.sampled_from(tuple(a for a in aims if a.group == group)))
