"""A row of table (a) (``validation.rules``): what a setting leads to, where Zephon says so,
and a configuration that shows it. Apart from the rows, so the table module is data only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from zephon_chaos.validation.model import Moment, ZephonConfig


class Reaction(str, Enum):
    """What Zephon does where a row's condition holds: raises, warns, or accepts silently."""

    ERROR = "error"
    WARNING = "warning"
    ACCEPTED = "accepted"
    """Accepted silently: recorded because a reader could expect otherwise."""


@dataclass(frozen=True)
class Citation:
    """A place in Zephon's source: a path inside the package, a function, a line, its text."""

    path: str
    function: str
    line: int
    needle: str
    """Text that line contains; a test checks it, so a moved line is noticed."""

    def __str__(self) -> str:
        return f"`{self.path}` `{self.function}` L{self.line}"


@dataclass(frozen=True)
class ZephonRule:
    """One row of table (a)."""

    id: str
    setting: str
    condition: str
    kind: Reaction
    outcome: str
    """Exception type name, warning category name, or ``-`` for accepted rows."""
    fragment: str
    moment: Moment | None
    cites: tuple[Citation, ...]
    witness: ZephonConfig
    """A configuration that shows the row; the suite probes it against real Zephon."""
    applies: Callable[[ZephonConfig], int] = field(compare=False, repr=False)
    """How many times the row fires for a configuration (0: not at all)."""
    notes: str = ""
    finding: bool = False
    """True where Zephon differs from its own documentation or from DESIGN.md."""
