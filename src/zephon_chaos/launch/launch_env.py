"""The environment every launch's processes start with, on every lane (CLI, warm)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from zephon_chaos.procs import SPAWNHOOK_DIR, ProcessRegistry

INHERITED_LAUNCH_VARS = (
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_ERROR_FILE",
    "ZEPHON_CHAOS_GROUP",
    "ZEPHON_CHAOS_PID_DIR",
)
"""Variables of an enclosing launch that would mislead a nested torchrun."""


def launch_env(
    tmpdir: Path, registry: ProcessRegistry, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """This process's environment less an enclosing launch's variables, with the launch's
    temp folder, gloo on loopback, one OpenMP thread (unless set), unbuffered output, the
    spawn hook that records every process (``procs``), its registry's tag, then
    ``extra`` (the launch spec's own variables, which win)."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED_LAUNCH_VARS}
    pythonpath = [SPAWNHOOK_DIR] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env.update(
        {
            "TMPDIR": str(tmpdir),
            "GLOO_SOCKET_IFNAME": "lo",
            "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(pythonpath),
        }
    )
    env.update(registry.env())
    env.update(extra or {})
    return env
