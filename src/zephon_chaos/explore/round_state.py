"""Where one round of the search stands: the property Hypothesis calls reads and moves it.

A round generates scenarios until its first new failure, then Hypothesis's shrinker replays
that failure and tries smaller candidates. Between the two, a hill climb of Hypothesis's
target phase may still offer a few candidates, which are not run. The stage says which of
these a call of the property is.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zephon_chaos.scenario import Scenario


class RoundStage(enum.Enum):
    SEARCHING = "generating new scenarios"
    FAILED = "a new failure was raised; Hypothesis has not begun shrinking it"
    SHRINKING = "Hypothesis's shrinker runs candidates smaller than the failure"


@dataclass
class RoundState:
    stage: RoundStage = RoundStage.SEARCHING
    sig: str | None = None
    """The signature of the round's new failure, once raised."""
    failing: Scenario | None = None
    """The scenario that raised it: Hypothesis's shrink phase begins by replaying it."""

    def failed(self, sig: str, scenario: Scenario) -> None:
        self.stage, self.sig, self.failing = RoundStage.FAILED, sig, scenario
