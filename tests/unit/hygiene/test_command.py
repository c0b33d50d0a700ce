"""A command-line run owns what it starts: a SIGKILLed run's leftovers are reaped by owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from zephon_chaos.hygiene.command import owned_command
from zephon_chaos.hygiene.ledger import SESSIONS
from zephon_chaos.hygiene.owner import BASE_VAR, OWNER_VAR, private_root, session_id
from zephon_chaos.procs import proc_id

COMMAND = """
import subprocess, sys
from zephon_chaos.hygiene.command import owned_command
with owned_command("run"):
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE,
    )
    child.stdout.readline()
    print(child.pid, flush=True)
    sys.stdin.read()  # until the test kills this process
"""


@pytest.fixture
def outside_pytest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No owner in the environment (as in a shell), and a temp base of this test's own."""
    monkeypatch.delenv(OWNER_VAR, raising=False)
    monkeypatch.setenv(BASE_VAR, str(tmp_path))
    return private_root(tmp_path)


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if item)


def test_a_killed_commands_processes_are_reaped_by_owner_at_the_next_start(
    outside_pytest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd = subprocess.Popen(
        [sys.executable, "-c", COMMAND],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert cmd.stdout is not None and cmd.stdin is not None
    child = proc_id(int(cmd.stdout.readline()))
    assert child is not None
    sid = session_id(cmd.pid)
    assert environ_of(child.pid)[OWNER_VAR] == f"{sid}/session"
    assert (outside_pytest / SESSIONS / sid / "ledger.json").is_file()
    cmd.send_signal(signal.SIGKILL)
    cmd.wait(timeout=30)
    cmd.stdin.close()
    cmd.stdout.close()
    assert child.alive(), "the orphan should outlive its killed command until reaped"

    with owned_command("explore") as ledger:
        assert ledger is not None
        assert os.environ[OWNER_VAR] == f"{session_id()}/session"
        err = capsys.readouterr().err
    assert "zephon-chaos explore: leftovers of a crashed run, removed:" in err
    assert f"process {child.pid} (" in err
    assert not child.alive()
    assert not (outside_pytest / SESSIONS / sid).exists()
    assert OWNER_VAR not in os.environ and not ledger.folder.exists()


def test_inside_an_owned_scope_a_command_adds_no_owner_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OWNER_VAR, "1-2/t9")
    with owned_command("run") as ledger:
        assert ledger is None and os.environ[OWNER_VAR] == "1-2/t9"
    assert os.environ[OWNER_VAR] == "1-2/t9"
