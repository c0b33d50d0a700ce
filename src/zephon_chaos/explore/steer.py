"""Steering a search round toward what the exploration has not exercised yet.

One :class:`RoundSteering` per round of the search's Hypothesis property. Its ``aims()``
name the fault cells no tier reached yet (``aiming.aims``); an aimed round (the explorer gives
them a share of its time, ``explore.config.AIM_SHARE``) lands most of its scenarios in one of
them (``zephon_chaos.aims``), which is what empties the four-way fault cells: hill climbing
alone reached a third of them in 15 minutes. Entering it
declares the tier's cell space (once) and arms the measuring of Zephon's code (in-process
tier: one scenario in ``codecov.MEASURE_EVERY``); ``observe(scenario)``, called from inside
the property after the scenario ran, reports to Hypothesis's ``target()`` how rare the
scenario's cells were when the round began (:func:`landing.rarity`, over what every tier
reached), so the round's target phase climbs toward rare cells. The score is taken against
the counts at the round's start: within a round it stays the same for the same scenario,
which hill climbing needs.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from hypothesis import target

from zephon_chaos.aims import Aim
from zephon_chaos.dimensions.cells import Cell
from zephon_chaos.explore.aiming import targets
from zephon_chaos.explore.landing import rarity
from zephon_chaos.explore.space import declare
from zephon_chaos.explore.summary import Coverage
from zephon_chaos.scenario import Scenario

TARGET_LABEL = "rarity of the scenario's cells"


class SearchOptions(Protocol):
    """What of the explorer's configuration fixes the space (``ExploreConfig`` fits)."""

    max_world: int
    max_phases: int
    store_faults: bool
    profile: str
    aim: bool

    @property
    def left_to(self) -> str | None:
        """A tier whose cells sibling shards reach: not aimed at here."""


class RoundSteering:
    def __init__(
        self, coverage: Coverage, tier: str, options: SearchOptions, round_no: int
    ) -> None:
        self.coverage = coverage
        self.tier = tier
        self.options = options
        self.round_no = round_no
        self.before: Counter[Cell] = Counter()

    def _declare(self) -> None:
        o = self.options
        if self.tier not in self.coverage.spaces:
            self.coverage.declare(
                declare(
                    self.tier,
                    max_world=o.max_world,
                    max_phases=o.max_phases,
                    store_faults=o.store_faults,
                    profile=o.profile,
                )
            )

    def aims(self) -> tuple[Aim, ...]:
        """The round's aims: this tier's fault cells no tier reached yet (none with
        ``aim`` off). Fixed for the round, so that its draws replay and shrink."""
        if not self.options.aim:
            return ()
        self._declare()
        aimed = targets(self.coverage.spaces[self.tier], self.coverage.combined())
        theirs = self._theirs()
        aimed = tuple((c, a) for c, a in aimed if c not in theirs)
        self.coverage.offer(self.tier, (c for c, _ in aimed))
        return tuple(a for _, a in aimed)

    def _theirs(self) -> frozenset[Cell]:
        """The cells a sibling shard's tier reaches (``SearchOptions.left_to``): its own
        search reaches them at its pace, and its counts are not seen here, so aiming at them
        would spend this tier's slow launches on what threads reach in a fraction of a
        second. Only the slow tier leaves cells to the fast one: the in-process tier leaves
        nothing to torchrun, whose space holds nearly all of its own (left to it, the
        in-process shards of seeds 260-264 aimed at nothing, and 44 cells of a rank's raise
        at a round point stayed unreached by both)."""
        o = self.options
        if o.left_to is None or o.left_to == self.tier or self.tier == "inproc":
            return frozenset()
        space = declare(
            o.left_to,
            max_world=o.max_world,
            max_phases=o.max_phases,
            store_faults=o.store_faults,
            profile=o.profile,
        )
        return frozenset(space.reachable())

    def __enter__(self) -> RoundSteering:
        self._declare()
        # Every tier's counts: a cell the other tier reached is no longer rare, so torchrun's
        # slow scenarios go where only processes can go.
        self.before = self.coverage.combined()
        if self.tier == "inproc":
            self.coverage.code_coverage().arm()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.coverage.code is not None:
            self.coverage.code.disarm()

    def observe(self, scenario: Scenario) -> None:
        """Inside the property: target the rarity of ``scenario``'s cells, if it ran."""
        last = self.coverage.last
        if last is None or last[0] is not scenario:
            return  # not run (past the deadline): nothing to score
        score = rarity(last[1], self.before, self.coverage.spaces.get(self.tier))
        target(score, label=TARGET_LABEL)
