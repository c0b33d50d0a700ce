"""Calls into the spawn hook (``procs/_spawnhook``) from inside a rank process.

Rank-side, so that the workload reaches the hook without importing the launcher: the hook
marks itself with ``HOOK_MARK`` instead of being known by its folder.
"""

from __future__ import annotations

import contextlib
import sys

HOOK_MARK = "ZEPHON_CHAOS_SPAWN_HOOK"


def spawn_hook_call(name: str) -> None:
    """Call ``name`` of the spawn hook if this process loaded ours (it always has in a group:
    the hook is first on the group's ``PYTHONPATH``); a no-op elsewhere."""
    hook = sys.modules.get("sitecustomize")
    fn = getattr(hook, name, None)
    if callable(fn) and getattr(hook, HOOK_MARK, False) is True:
        with contextlib.suppress(Exception):
            fn()
