"""The death watch: each recorded process's death, stamped from outside, never a late stamp."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from zephon_chaos.launch.deathwatch import DeathWatch
from zephon_chaos.procs import ProcId, proc_id

pytestmark = [
    pytest.mark.skipif(not DeathWatch.available(), reason="no pidfd_open here"),
    pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"),
]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(SLEEPER)
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def recorded(pid_dir: Path, proc: subprocess.Popen[bytes]) -> ProcId:
    """Record ``proc`` the way the spawn hook does: a file ``<pid>-<start ticks>``."""
    pid_id = proc_id(proc.pid)
    assert pid_id is not None
    (pid_dir / f"{pid_id.pid}-{pid_id.ticks}").write_text("{}")
    return pid_id


def test_a_death_is_stamped_between_the_kill_and_the_reaping(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    watch = DeathWatch(tmp_path).start()
    try:
        pid_id = recorded(tmp_path, sleeper)
        assert watch.wait_watching(pid_id, timeout_s=10), "the record was never picked up"
        killed_at = time.monotonic()
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait(timeout=10)
        reaped_at = time.monotonic()
    finally:
        moments = watch.stop()
    assert killed_at <= moments[pid_id] <= reaped_at + 1.0


def test_the_dead_and_the_recycled_get_no_stamp(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = recorded(tmp_path, gone)
    gone.wait(timeout=10)
    live = proc_id(sleeper.pid)
    assert live is not None
    recycled = ProcId(live.pid, live.ticks + 1)  # the same PID, another process's start time
    (tmp_path / f"{recycled.pid}-{recycled.ticks}").write_text("{}")
    honest = recorded(tmp_path, sleeper)
    watch = DeathWatch(tmp_path).start()
    try:
        assert watch.wait_watching(honest, timeout_s=10)
        sleeper.kill()
        sleeper.wait(timeout=10)
    finally:
        moments = watch.stop()
    assert dead not in moments and recycled not in moments
    assert honest in moments
    assert not watch.wait_watching(recycled, timeout_s=0)


def test_the_stamper_process_ends_with_the_watch(tmp_path: Path) -> None:
    """The watch's own process is the harness's: none outlives ``stop()``."""
    me = psutil.Process()
    before = {c.pid for c in me.children()}
    watch = DeathWatch(tmp_path).start()
    started = {c.pid for c in me.children()} - before
    watch.stop()
    assert len(started) == 1
    assert not (started & {c.pid for c in me.children()}), "the stamper outlived stop()"
    assert watch.stop() == {}, "a second stop() is a no-op"
