"""Where an exploration's time goes: searching, shrinking or confirming, per tier.

A search that finds failures can spend its whole budget shrinking them (one torchrun
scenario takes seconds, and Hypothesis's shrinker runs hundreds). The explorer charges
every moment of a tier's search to one activity with :class:`ActivityClock`, and lets
shrinking spend only what generating new scenarios has earned: :func:`shrink_allowance_s`.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Iterator
from typing import Protocol


class Activity(enum.Enum):
    SEARCH = "searching"
    """Running new scenarios: Hypothesis's generate phase."""
    SHRINK = "shrinking"
    """Hypothesis's shrink phase and the polishing pass after it."""
    CONFIRM = "confirming"
    """Rerunning a minimal scenario to label it, or on another tier."""


class Charged(Protocol):
    """What the clock charges: a tier's statistics."""

    def charge(self, activity: Activity, seconds: float) -> None: ...


class ActivityClock:
    """Charges the wall time between two switches to the activity (and tier) switched from.

    Every moment between the first switch and :meth:`stop` is charged once, so a tier's
    activities add up to its time exactly: overheads (Hypothesis drawing a candidate, the
    polishing pass choosing one) go to the activity they serve.
    """

    def __init__(self, now: float | None = None) -> None:
        self._target: Charged | None = None
        self._activity: Activity | None = None
        self._since = time.monotonic() if now is None else now

    @property
    def activity(self) -> Activity | None:
        return self._activity

    @property
    def target(self) -> Charged | None:
        return self._target

    def switch(self, target: Charged | None, activity: Activity | None) -> float:
        """Charge the time since the last switch, then charge ``target``'s ``activity``;
        returns the moment of the switch."""
        now = time.monotonic()
        if self._target is not None and self._activity is not None:
            self._target.charge(self._activity, now - self._since)
        self._target, self._activity, self._since = target, activity, now
        return now

    def flush(self) -> None:
        """Charge the time so far without changing the activity."""
        self.switch(self._target, self._activity)

    def stop(self) -> float:
        return self.switch(None, None)

    @contextlib.contextmanager
    def during(self, target: Charged, activity: Activity) -> Iterator[None]:
        """Charge ``target``'s ``activity`` inside the block, then what was charged before."""
        before = (self._target, self._activity)
        self.switch(target, activity)
        try:
            yield
        finally:
            self.switch(*before)


def shrink_allowance_s(search_s: float, spent_s: float, search_share: float) -> float:
    """Seconds shrinking may still spend so that at least ``search_share`` of the time goes
    to new scenarios: it accrues at ``(1 - share) / share`` of each second spent searching.

    ``spent_s`` is what the search has spent on anything but new scenarios (shrinking and
    the confirmations it needs). Negative when a run overshot the allowance.
    """
    if not 0.0 < search_share <= 1.0:
        raise ValueError(f"search share {search_share}: must be within (0, 1]")
    return search_s * (1.0 - search_share) / search_share - spent_s
