"""What the search's property learns of one scenario, and the signals it gives Hypothesis.

A failing scenario raises an exception type of its own signature (Hypothesis shrinks each as
a distinct bug); :class:`EndShrinking`, a ``BaseException``, ends a round's shrinking at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zephon_chaos.errors import Violation
from zephon_chaos.scenario import Scenario


class ShrinkStop(enum.Enum):
    """Why the shrinking of a finding stopped before Hypothesis was done with it."""

    BOUND = "its own shrinking time is up"
    ALLOWANCE = "the tier's shrink allowance is spent"
    DEADLINE = "the search is over"


class EndShrinking(BaseException):
    """Raised inside the property to end a round's shrinking at once.

    Hypothesis treats ``Exception`` (and ``SystemExit``, ``GeneratorExit``) as failures to
    shrink; any other ``BaseException`` ends its run and propagates, as a KeyboardInterrupt
    does, without running further candidates.
    """

    def __init__(self, reason: ShrinkStop) -> None:
        super().__init__(reason.value)
        self.reason = reason


@dataclass(frozen=True)
class Judged:
    """One scenario judged during the search: whether it ran, and its signature if it failed."""

    ran: bool
    sig: str | None = None


class RouteCheck(enum.Enum):
    """A minimal scenario shrunk in process, rerun on its finding's own tier."""

    CONFIRMED = "fails alike"
    REFUTED = "does not fail alike"
    IN_PROCESS_ONLY = "first seen in process, and fails alike only there"
    NOT_RUN = "not run (out of time)"


class ScenarioViolation(Violation, AssertionError):
    """Raised inside the property for a failing scenario; a subclass per signature."""


_VIOLATION_TYPES: dict[str, type[ScenarioViolation]] = {}


def violation_type(sig: str) -> type[ScenarioViolation]:
    """One exception type per signature: Hypothesis shrinks each as a distinct bug."""
    if sig not in _VIOLATION_TYPES:
        name = "Violation_" + "".join(ch if ch.isalnum() else "_" for ch in sig)
        _VIOLATION_TYPES[sig] = type(name, (ScenarioViolation,), {})
    return _VIOLATION_TYPES[sig]


def expressible_in_process(scenario: Scenario) -> bool:
    """Whether rank threads can run ``scenario`` faithfully (the in-process tier's refusal)."""
    from zephon_chaos.inproc import inproc_refusal

    return inproc_refusal(scenario) is None
