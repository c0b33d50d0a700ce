"""Which proposed Zephon fixes the installed wheel carries (``scripts/patched_zephon.py``
writes them into its ``dist-info/ZEPHON_PATCHES``; ``tox -e patched`` installs it)."""

from __future__ import annotations

from functools import cache
from importlib import metadata

MARKER = "ZEPHON_PATCHES"


@cache
def installed_patches() -> frozenset[str]:
    """The patches of the installed zephon; empty for the release itself, or none."""
    try:
        text = metadata.distribution("zephon").read_text(MARKER)
    except metadata.PackageNotFoundError:
        return frozenset()
    return frozenset((text or "").split())
