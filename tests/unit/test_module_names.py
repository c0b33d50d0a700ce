"""One name, one module: no two modules of the package share a basename (docs/architecture.md,
"Adding a module"), so an import, a traceback or a test file names one module."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import zephon_chaos

PACKAGE = Path(zephon_chaos.__file__).parent
SHARED = {
    "cli.py": {"cli.py", "faults/proxy/cli.py"},
    "aiming.py": {"explore/aiming.py", "strategies/aiming.py"},
}
"""The pairs that keep one basename on purpose, each two halves of one job: the command line
of ``zephon-chaos`` and of the embedded proxy server; the cells a round aims at and the
draw of which launches carry the aims."""
ANY_PACKAGE = ("__init__.py", "__main__.py")


def modules_by_basename() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ANY_PACKAGE:
            found[path.name].add(path.relative_to(PACKAGE).as_posix())
    return found


def test_no_two_modules_share_a_basename_but_the_named_pairs() -> None:
    shared = {name: paths for name, paths in modules_by_basename().items() if len(paths) > 1}
    assert shared == SHARED
