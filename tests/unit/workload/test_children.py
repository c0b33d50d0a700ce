"""A child fault kills exactly the rank's ``spawn`` children (Zephon's ``runner: process``
workers) and leaves its other children alone, on real children of the test process.

Every child has a deadline: a spawn child that never says it is ready fails the test, and
each one is ended and reaped at teardown, killed past its deadline.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import subprocess
import sys
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import psutil
import pytest

from zephon_chaos.workload.children import kill_workers, pipeline_workers

READY = "ready"
START_S = 60.0
"""A spawn child starts a fresh interpreter and imports this module before it answers."""
STOP_S = 10.0


def wait_for_parent(conn: Connection) -> None:
    """A spawn child's body: say it is ready, then block until the parent closes its end."""
    conn.send(READY)
    with contextlib.suppress(EOFError):
        conn.recv()


@pytest.fixture
def worker() -> Iterator[BaseProcess]:
    """A ``spawn`` child of the test process (as Zephon starts its workers), ready: it has
    answered on its pipe, so its command line is its own, not the parent's."""
    tracker = resource_tracker._resource_tracker
    tracked = tracker._fd is not None
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=wait_for_parent, args=(theirs,), daemon=True)
    proc.start()
    theirs.close()
    try:
        assert ours.poll(START_S), f"the spawn child did not answer within {START_S:.0f}s"
        assert ours.recv() == READY
        yield proc
    finally:
        ours.close()  # the child's recv() ends: it exits of itself
        proc.join(STOP_S)
        if proc.is_alive():
            proc.kill()
            proc.join(STOP_S)
        if not tracked:
            # Spawning started multiprocessing's resource tracker, another child of the test
            # process: stopped (and reaped) too, so that nothing this test started survives.
            tracker._stop()
        assert not proc.is_alive(), f"spawn child {proc.pid} outlived the test"


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A plain child of the test process that is no spawn child: it reads its stdin to EOF."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_S)


@pytest.mark.parametrize("explicit", [False, True], ids=["default-parent", "explicit-parent"])
def test_the_workers_are_the_spawn_children_only(
    worker: BaseProcess, bystander: subprocess.Popen[bytes], explicit: bool
) -> None:
    """The rank's workers are its spawn children; a plain child (or the resource tracker the
    spawn context started) is not one, whichever way the parent is named."""
    of = psutil.Process() if explicit else None
    pids = {p.pid for p in pipeline_workers(of)}
    assert pids == {worker.pid}
    assert bystander.pid not in pids


def test_killing_the_workers_sigkills_the_spawn_child_and_spares_the_rest(
    worker: BaseProcess, bystander: subprocess.Popen[bytes]
) -> None:
    """``kill_workers`` returns exactly the PIDs it signalled (the child fault's record), the
    worker dies by SIGKILL as under the OOM killer, and the plain child lives on."""
    assert kill_workers() == [worker.pid]
    worker.join(STOP_S)
    assert worker.exitcode == -signal.SIGKILL
    assert bystander.poll() is None, "a child that is no worker was killed"
    assert pipeline_workers() == []


def test_with_no_spawn_child_nothing_is_killed(bystander: subprocess.Popen[bytes]) -> None:
    """A rank with no workers kills nothing and says so (an empty list): the evidence
    ``runner.checks.child_fault_gaps`` reads as a fault that found no worker."""
    assert kill_workers() == []
    assert bystander.poll() is None


def test_killing_one_worker_takes_the_lowest_pid_only(
    worker: BaseProcess, bystander: subprocess.Popen[bytes]
) -> None:
    """``kill_workers(every=False)``: one worker, as the OOM killer most often takes one."""
    assert kill_workers(every=False) == [worker.pid]
    worker.join(STOP_S)
    assert worker.exitcode == -signal.SIGKILL
    assert bystander.poll() is None
