"""Teardown under interruption: Ctrl-C, SIGTERM, or a dying xdist worker leave nothing running.

An inner pytest session runs a test whose torchrun group hangs (a rank blocked in a store
wait, deadline far away). Once both ranks announce that they wait, the inner test writes down
the group's PID directory; then the session is interrupted. Afterwards no recorded process of
the group survives and none of the ports they listened on is held by one of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zephon_chaos.hygiene.proctable import listening_ports_of
from zephon_chaos.procs import ProcId, scan_tag

pytestmark = pytest.mark.cpu

HANG_SCRIPT = Path(__file__).parents[1] / "diagnostics" / "scripts" / "hang.py"
INNER = r"""
import json, os, time
from pathlib import Path

OUT = Path(os.environ["INTERRUPT_OUT"])


def test_a_group_that_hangs(torchrun_group, tmp_path):
    group = torchrun_group.spawn(
        os.environ["HANG_SCRIPT"], nproc=2, deadline_s=600,
        env={"HANG_HOW": "store_wait", "HANG_READY_DIR": str(tmp_path)},
    )
    end = time.monotonic() + 240
    while not ((tmp_path / "rank0").exists() and (tmp_path / "rank1").exists()):
        assert all(a.poll() is None for a in group.agents), "the group ended early"
        assert time.monotonic() < end, "the ranks never announced that they wait"
        time.sleep(0.05)
    record = {"pid_dir": str(group.registry.pid_dir), "tag": group.registry.tag,
              "pytest": os.getpid(), "controller": os.getppid()}
    (OUT / "ready.json.tmp").write_text(json.dumps(record))
    os.replace(OUT / "ready.json.tmp", OUT / "ready.json")
    group.wait()
"""


class Inner:
    """The inner pytest session (its own process group, killed whole if a check fails)."""

    def __init__(self, root: Path, args: list[str], env: dict[str, str]) -> None:
        self.out = root / "out"
        self.out.mkdir()
        (root / "test_inner.py").write_text(INNER)
        env = dict(os.environ, INTERRUPT_OUT=str(self.out), HANG_SCRIPT=str(HANG_SCRIPT), **env)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-rA",
                f"--basetemp={root / 'basetemp'}",
                *args,
                "test_inner.py",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def ready(self, limit_s: float = 300) -> dict:
        """Wait for the inner test's record (its group is up and hanging)."""
        path = self.out / "ready.json"
        end = time.monotonic() + limit_s
        while not path.exists():  # the only event crossing the process boundary is this file
            if self.proc.poll() is not None:
                pytest.fail(f"the inner session ended early:\n{self.output()}")
            if time.monotonic() > end:
                pytest.fail(f"the inner group never got ready within {limit_s:.0f}s")
            time.sleep(0.05)
        return json.loads(path.read_text())

    def finish(self, limit_s: float = 120) -> int:
        try:
            self.proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the inner session did not stop within {limit_s:.0f}s of the signal")
        return self.proc.returncode

    def output(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture
def inner(tmp_path: Path, sigint_heard: None) -> Iterator[Callable[..., Inner]]:
    started: list[Inner] = []

    def start(*args: str, **env: str) -> Inner:
        session = Inner(tmp_path, list(args), env)
        started.append(session)
        return session

    yield start
    for session in started:
        session.kill()


def group_processes(record: dict) -> tuple[set[ProcId], dict[int, int]]:
    """Every process recorded for the group, and the ports they listen on now."""
    procs = set(scan_tag(record["tag"]))
    for entry in os.listdir(record["pid_dir"]):
        pid, _, ticks = entry.partition("-")
        if pid.isdigit() and ticks.isdigit():
            procs.add(ProcId(int(pid), int(ticks)))
    return procs, listening_ports_of(p.pid for p in procs if p.alive())


def assert_nothing_left(procs: set[ProcId], ports: dict[int, int], tag: str) -> None:
    assert procs, "the group recorded no processes: nothing was checked"
    assert ports, "the group listened on no port: nothing was checked"
    survivors = [p for p in procs if p.alive()]
    assert survivors == [], f"still running: {[(p.pid, p.cmdline()) for p in survivors]}"
    assert scan_tag(tag) == set()
    ours = {p.pid for p in procs}
    still = listening_ports_of(ours)
    assert still == {}, f"ports still held by the group: {still}"


@pytest.mark.parametrize(
    "sig",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
    ids=["SIGINT", "SIGTERM"],
)
def test_an_interrupted_session_leaves_nothing_running(inner, sig: int) -> None:
    session = inner()
    record = session.ready()
    procs, ports = group_processes(record)
    assert all(p.alive() for p in procs)

    os.kill(record["pytest"], sig)
    code = session.finish()

    assert code == pytest.ExitCode.INTERRUPTED, session.output()
    assert_nothing_left(procs, ports, record["tag"])


@pytest.mark.slow
def test_a_killed_xdist_worker_leaves_nothing_running(inner) -> None:
    session = inner("-n", "1", "--max-worker-restart", "0")
    record = session.ready()
    procs, ports = group_processes(record)
    assert record["controller"] != record["pytest"]

    os.kill(record["pytest"], signal.SIGKILL)  # the worker dies without any teardown
    session.finish()

    assert "crashed" in session.output() or "worker" in session.output()
    assert_nothing_left(procs, ports, record["tag"])


@pytest.mark.slow
def test_zephon_chaos_clean_removes_what_a_killed_session_left(inner, tmp_path: Path) -> None:
    # A temp folder of its own: no other session's start-up reaps this one's leftovers first.
    base = tmp_path / "base"
    base.mkdir()
    session = inner(TMPDIR=str(base), ZEPHON_CHAOS_TMP_BASE=str(base))
    record = session.ready()
    procs, ports = group_processes(record)

    os.killpg(session.proc.pid, signal.SIGKILL)  # pytest dies; its group lives on, orphaned
    session.finish()
    assert all(p.alive() for p in procs), "the group should have outlived its session"
    ledgers = list((base / f"zephon-chaos-{os.getuid()}" / "sessions").iterdir())
    assert len(ledgers) == 1

    cleaned = subprocess.run(
        [sys.executable, "-m", "zephon_chaos.cli", "clean", "--temp-dir", str(base)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cleaned.returncode == 0, cleaned.stderr
    for p in procs:
        assert f"process {p.pid} (" in cleaned.stdout, cleaned.stdout
    assert f"its pytest session ({ledgers[0].name}) crashed" in cleaned.stdout
    assert f"folder {ledgers[0]}: of crashed session" in cleaned.stdout
    assert not ledgers[0].exists()
    assert_nothing_left(procs, ports, record["tag"])
