"""The known defects' package: a defect written in a module of its own counts only once it is
listed, so a module whose defect ``KNOWN_DEFECTS`` forgot would silently explain nothing; and
each defect stands on a standalone reproduction."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

from zephon_chaos.explore import known
from zephon_chaos.explore.known import KNOWN_DEFECTS, KnownDefect, KnownKind


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


REPO = Path(__file__).resolve().parents[3]
STANDALONE = re.compile(r"tests/zephon/repro/\w+\.py")
ALLOWED = {"torch", "zephon"}
"""What a standalone reproduction may import beyond the standard library."""


def _imported_roots(script: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


DEFECTS = [d for d in KNOWN_DEFECTS if d.kind is KnownKind.DEFECT]
LIMITATIONS = [d for d in KNOWN_DEFECTS if d.kind is KnownKind.LIMITATION]


@pytest.mark.parametrize("limitation", LIMITATIONS, ids=lambda d: d.id)
def test_every_limitation_names_its_consequence_and_a_mitigation_shown_to_work(
    limitation: KnownDefect,
) -> None:
    """A limitation is Zephon doing what it documents: its evidence cites the documentation,
    and it says what a recipe loses and which test shows the mitigation working."""
    assert "zephon 0.2.0" in limitation.evidence
    assert limitation.consequence and limitation.mitigation
    tests = re.findall(r"tests/[\w/]+\.py", limitation.mitigation)
    assert tests, f"{limitation.id}: the mitigation names no test that runs it"
    assert all((REPO / t).is_file() for t in tests), tests


@pytest.mark.parametrize("defect", DEFECTS, ids=lambda d: d.id)
def test_every_defect_names_a_standalone_reproduction_of_torch_and_zephon_only(
    defect: KnownDefect,
) -> None:
    """A finding in Zephon counts only when a script importing nothing but torch and zephon
    shows it: the evidence names one, it exists, and it imports nothing else."""
    scripts = STANDALONE.findall(defect.evidence)
    assert scripts, f"{defect.id}: the evidence names no standalone reproduction"
    for name in scripts:
        script = REPO / name
        assert script.is_file(), f"{defect.id}: {name} does not exist"
        foreign = _imported_roots(script) - ALLOWED - set(sys.stdlib_module_names) - {"__future__"}
        assert foreign == set(), f"{name} imports {sorted(foreign)}"
