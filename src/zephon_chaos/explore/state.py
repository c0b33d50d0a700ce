"""What the explorer, its judge and its shrinker share of one exploration, declared.

The explorer (:mod:`.search`) holds a :class:`~.judging.Judge` and a
:class:`~.shrinking.Shrinker`; all three read and move the same findings, result, clock and
progress line, and the times the run began and ends. They hold one :class:`ExploreState`
rather than each other's attributes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from zephon_chaos.explore.activity import ActivityClock
from zephon_chaos.explore.config import ExploreConfig
from zephon_chaos.explore.findings import Finding
from zephon_chaos.explore.progress import Progress
from zephon_chaos.explore.summary import ExploreResult
from zephon_chaos.scenario import Scenario


@dataclass
class ExploreState:
    config: ExploreConfig
    result: ExploreResult
    findings: dict[str, Finding] = field(default_factory=dict)
    """Per signature: its finding, with the smallest failing scenario seen so far."""
    routes: dict[str, str] = field(default_factory=dict)
    """Per signature: the tier its scenarios are shrunk on."""
    tier_best: dict[str, tuple[Scenario, str]] = field(default_factory=dict)
    """A finding shrunk in process: its smallest scenario that failed on its own tier."""
    clock: ActivityClock = field(default_factory=ActivityClock)
    """Charges every moment of a tier's search to searching, shrinking or confirming."""
    progress: Progress | None = None
    """The live progress line, from the start of the run."""
    started: float = 0.0
    """When the run began (``time.monotonic()``)."""
    end: float = 0.0
    """When its budget ends."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def goal_met(self) -> bool:
        stop = self.config.stop_when
        return stop is not None and stop(self.findings)
