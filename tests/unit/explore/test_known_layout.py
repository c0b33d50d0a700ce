"""The known defects' package: a defect written in a module of its own counts only once it is
listed, so a module whose defect ``KNOWN_DEFECTS`` forgot would silently explain nothing."""

from __future__ import annotations

import importlib
import pkgutil

from zephon_chaos.explore import known
from zephon_chaos.explore.known import KNOWN_DEFECTS, KnownDefect


def _defined() -> list[KnownDefect]:
    """Every ``KnownDefect`` a module of the package defines, in module order."""
    found: list[KnownDefect] = []
    for info in pkgutil.iter_modules(known.__path__, prefix=f"{known.__name__}."):
        module = importlib.import_module(info.name)
        found += [v for v in vars(module).values() if isinstance(v, KnownDefect)]
    return found


def test_every_defect_a_module_defines_is_listed_once() -> None:
    defined = _defined()
    assert sorted(d.id for d in defined) == sorted(d.id for d in KNOWN_DEFECTS)
    assert len({d.id for d in KNOWN_DEFECTS}) == len(KNOWN_DEFECTS)


def test_the_package_exports_every_defect() -> None:
    """Tests and ``tests/zephon`` import a defect from ``explore.known``, not its module."""
    exported = [getattr(known, name) for name in known.__all__]
    missing = [d.id for d in KNOWN_DEFECTS if not any(e is d for e in exported)]
    assert missing == []
