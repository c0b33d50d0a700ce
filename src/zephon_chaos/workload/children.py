"""A rank kills its own pipeline's child processes (``ChildFault``), as the OOM killer would.

Zephon's ``runner: process`` starts its fetch workers with multiprocessing's ``spawn``: each is
a child of the rank whose command line runs ``spawn_main``. The rank's other children
(multiprocessing's resource tracker) run something else and are left alone.
"""

from __future__ import annotations

import contextlib
import signal

import psutil

SPAWNED_MARK = "spawn_main"
"""What a multiprocessing ``spawn`` child's command line runs."""


def pipeline_workers(parent: psutil.Process | None = None) -> list[psutil.Process]:
    """The live spawned children of ``parent`` (this process): its pipeline's workers."""
    found = []
    for child in (parent or psutil.Process()).children():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            if any(SPAWNED_MARK in part for part in child.cmdline()):
                found.append(child)
    return found


def kill_workers(every: bool = True, workers: list[psutil.Process] | None = None) -> list[int]:
    """SIGKILL every worker of this rank's pipeline (else the one with the lowest PID), of
    ``workers`` where the caller listed them already; the PIDs signalled (empty: none)."""
    killed = []
    workers = sorted(pipeline_workers() if workers is None else workers, key=lambda w: w.pid)
    for worker in workers if every else workers[:1]:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.send_signal(signal.SIGKILL)
            killed.append(worker.pid)
    return killed
