"""The declared scenario space: every cell the strategies can draw, and why not where not.

Each dimension declares its own cells (``explore.table``), from the values the strategies
draw, so a value added there adds its cell here. A cell the strategies cannot reach for a
run's tier and options carries the reason (``dimensions.cells.Why``); an exploration's counts
map onto the cells (``landing.cells_of``), so a report shows what never ran as well as what
did.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from zephon_chaos.dimensions.cells import Cell, Declared, Dim, Why
from zephon_chaos.dimensions.settings import Options
from zephon_chaos.explore.table import table

__all__ = ["Declared", "Space", "declare"]


@dataclass(frozen=True)
class Space:
    tier: str
    max_world: int
    max_phases: int
    faults: bool
    store_faults: bool
    cells: tuple[Declared, ...]

    @cached_property
    def _reasons(self) -> dict[Cell, Why | None]:
        return {d.cell: d.why_not for d in self.cells}

    def reachable(self) -> list[Cell]:
        return [d.cell for d in self.cells if d.why_not is None]

    def unreachable(self) -> list[Declared]:
        return [d for d in self.cells if d.why_not is not None]

    def why_not(self, cell: Cell) -> Why | None:
        return self._reasons.get(cell)

    def __contains__(self, cell: object) -> bool:
        return cell in self._reasons

    def dims(self) -> list[Dim]:
        """The dimensions in declaration order."""
        return list(dict.fromkeys(d.cell.dim for d in self.cells))


def declare(
    tier: str,
    max_world: int = 4,
    max_phases: int = 5,
    faults: bool = True,
    store_faults: bool = False,
    profile: str = "default",
) -> Space:
    """Every cell of every dimension (``explore.table``) for ``tier`` and these options."""
    o = Options(tier, profile, store_faults, faults, max_world, max_phases)  # type: ignore[arg-type]
    cells = tuple(d for dim in table() for d in dim.declare(o))
    return Space(tier, max_world, max_phases, faults, store_faults, cells)
