"""Waiting for the ranks' announcements: the one event that crosses the process boundary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest


def wait_for_files(paths: list[Path], still_running: Callable[[], bool], limit_s: float) -> float:
    """Wait until every path exists (the ranks' 'now waiting' event); return seconds waited.

    Polls the file system: the ranks announce by writing a file, and no other event crosses
    the process boundary. Fails (instead of hanging) if the group ends or the limit passes.
    """
    start = time.monotonic()
    while not all(p.exists() for p in paths):
        if not still_running():
            pytest.fail(f"the group ended before every rank announced {[p.name for p in paths]}")
        if time.monotonic() - start > limit_s:
            pytest.fail(
                f"no announcement from {[p.name for p in paths if not p.exists()]} "
                f"within {limit_s:.0f}s"
            )
        time.sleep(0.05)
    return time.monotonic() - start
