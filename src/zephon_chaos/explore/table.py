"""The table of the declared space's dimensions, in the order reports list them: each written
once (``explore.dimension``), the settings' taken from their own table
(``dimensions.settings``), so that a setting added there is declared, landed and aimed at.

docs/architecture.md ("One table of dimensions") shows what adding one takes."""

from __future__ import annotations

from zephon_chaos.dimensions import settings
from zephon_chaos.explore.dimension import Dimension, of_setting
from zephon_chaos.explore.fault_dims import ARRIVAL, HOSTED, LINK_FAULTS, RANK_FAULTS
from zephon_chaos.explore.layout_dims import DATA, LAUNCHES, RESUMES

_built: tuple[tuple[settings.Setting, ...], tuple[Dimension, ...]] | None = None


def table() -> tuple[Dimension, ...]:
    """Every dimension: the launches' layouts, the settings (``settings.SETTINGS`` as it is at
    the call: a test's added setting is seen), the data, resumes, faults and arrival."""
    global _built
    if _built is None or _built[0] is not settings.SETTINGS:
        _built = (settings.SETTINGS, _of(settings.SETTINGS))
    return _built[1]


def _of(setting_table: tuple[settings.Setting, ...]) -> tuple[Dimension, ...]:
    return (
        *LAUNCHES,
        *(of_setting(s) for s in setting_table),
        *DATA,
        *RESUMES,
        *RANK_FAULTS,
        *LINK_FAULTS,
        *HOSTED,
        *ARRIVAL,
    )
