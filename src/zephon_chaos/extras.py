"""What the ``explore`` extra brings, whether it is here, and what a run does without it.

The plugin, ``zephon-chaos run`` and ``replay`` need neither matplotlib nor coverage.py, so
the package does not require them: ``pip install 'zephon-chaos[explore]'`` adds them. Where
one is missing, the explorer leaves out what it draws or measures and says so once, and a
command that cannot do its job without it (``bench`` plots) stops before it starts, naming
the install line, never with a traceback from deep inside.

Presence is checked with ``importlib.util.find_spec``: nothing is imported to ask (matplotlib
takes a second), and a module blocked with ``sys.modules[name] = None`` counts as missing.
"""

from __future__ import annotations

import enum
import importlib.util

from zephon_chaos.errors import InvalidInput

EXPLORE_EXTRA = "zephon-chaos[explore]"
INSTALL = f"pip install '{EXPLORE_EXTRA}'"
PLOTS_INSTEAD = "pass --no-plots for the CSV files only"
"""``bench``'s way out without matplotlib."""


class Extra(enum.Enum):
    """A module of the ``explore`` extra: its import name, and what it is used for."""

    MATPLOTLIB = ("matplotlib", "PNG timelines and plots")
    COVERAGE = ("coverage", "Zephon's code reached by the in-process tier (coverage sampling)")

    def __init__(self, module: str, use: str) -> None:
        self.module = module
        self.use = use

    @property
    def present(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):  # a broken or spec-less entry in sys.modules
            return False

    def left_out(self) -> str:
        """The one line a run that goes on without it says."""
        return f"{self.module} is not installed: no {self.use} ({INSTALL})"


def missing(*extras: Extra) -> list[Extra]:
    """Of ``extras`` (every one by default), those not installed here."""
    return [e for e in extras or tuple(Extra) if not e.present]


class MissingExtra(InvalidInput, ImportError):
    """What was asked for needs a module of the ``explore`` extra that is not installed."""


def require(extra: Extra, needed_for: str, instead: str = "") -> None:
    """Raise :class:`MissingExtra` unless ``extra`` is installed; ``instead``: another way
    out (a flag that does without it)."""
    if not extra.present:
        other = f", or {instead}" if instead else ""
        raise MissingExtra(f"{needed_for}: {extra.module} is not installed; {INSTALL}{other}")
