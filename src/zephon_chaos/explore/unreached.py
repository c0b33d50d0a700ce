"""Why a cell that some tier can reach was reached by none: the report's answer per hole.

A count of zero says nothing of its cause. The search reaches a fault cell by plain draws at
the strategies' odds, or by aiming at it (``explore.aiming``): only within the aimed share
of a tier's search, each kind of fault at odds set by its cells and their cost
(``strategies.aiming.group_odds``). So a hole is either out of the aims' reach, never aimed
at, or aimed at without a launch landing in it; the report names which, and how often it
was aimed at.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zephon_chaos.dimensions.cells import Cell
from zephon_chaos.explore.aiming import aim_at


class Unreached(enum.Enum):
    PLAIN_ONLY = "no aim targets it: plain draws alone reach it, at the strategies' odds"
    NEVER_AIMED = (
        "never among a round's aims: no tier that reaches it ran an aimed round while it "
        "was a hole (the aimed share ran out, or the run was too short)"
    )
    MISSED = "among the aims of {rounds} aimed round(s); no launch drawn in them landed in it"


@dataclass(frozen=True)
class Hole:
    """A reachable cell no tier reached, who could have, and why none did."""

    cell: Cell
    tiers: tuple[str, ...]
    """The tiers whose space can reach it."""
    why: Unreached
    rounds: int = 0
    """Aimed rounds, over those tiers, whose aims held it."""

    def reason(self) -> str:
        return self.why.value.format(rounds=self.rounds)


def explain(cell: Cell, tiers: tuple[str, ...], rounds: int) -> Hole:
    """The hole ``cell``, reachable by ``tiers``, among the aims of ``rounds`` aimed rounds."""
    if aim_at(cell) is None:
        why = Unreached.PLAIN_ONLY
    elif rounds == 0:
        why = Unreached.NEVER_AIMED
    else:
        why = Unreached.MISSED
    return Hole(cell, tiers, why, rounds)
