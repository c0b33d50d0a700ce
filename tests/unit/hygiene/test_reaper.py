"""What the reaper removes (leftovers of crashed sessions) and what it never touches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zephon_chaos.cli import main as cli_main
from zephon_chaos.hygiene.ledger import SESSIONS, SessionLedger
from zephon_chaos.hygiene.owner import OWNER_VAR, owner_value, private_root, session_id
from zephon_chaos.hygiene.reaper import reap
from zephon_chaos.procs import PID_DIR_VAR, TAG_VAR, ProcId, proc_id

SLEEPER = "import sys, time; print('up', flush=True); time.sleep(600)"


@pytest.fixture
def dead_session() -> str:
    """The session id of a process that has exited (as a crashed pytest would have)."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    sid = session_id(proc.pid)
    proc.kill()
    proc.wait(timeout=30)
    proc.stdout.close()
    return sid


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], ProcId]]:
    procs: list[subprocess.Popen[bytes]] = []

    def run(env: dict[str, str]) -> ProcId:
        full = {k: v for k, v in os.environ.items() if k != OWNER_VAR}
        full.update(env)
        proc = subprocess.Popen([sys.executable, "-c", SLEEPER], env=full, stdout=subprocess.PIPE)
        procs.append(proc)
        assert proc.stdout is not None
        proc.stdout.readline()  # it is up: its environment is readable
        pid = proc_id(proc.pid)
        assert pid is not None
        return pid

    yield run
    for proc in procs:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def crashed_ledger(root: Path, sid: str, dirs: list[Path]) -> Path:
    folder = root / SESSIONS / sid
    folder.mkdir(parents=True)
    (folder / "ledger.json").write_text(
        json.dumps({"session": sid, "argv": ["pytest", "-n", "2"], "dirs": [str(d) for d in dirs]})
    )
    return folder


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_crashed_sessions_processes_and_folders_are_removed(
    tmp_path: Path, dead_session: str, start, dry_run: bool
) -> None:
    root = private_root(tmp_path)
    left = tmp_path / "zc-left"
    left.mkdir()
    folder = crashed_ledger(root, dead_session, [left])
    orphan = start({OWNER_VAR: owner_value(dead_session, "t3")})
    bystander = start({OWNER_VAR: owner_value(session_id(), "t1")})  # a live owner

    done = reap(root, dry_run=dry_run)

    text = done.describe()
    assert text.startswith("would remove:" if dry_run else "removed:")
    assert f"process {orphan.pid} (" in text and f"({dead_session}) crashed" in text
    assert f"folder {left}: of crashed session {dead_session} (pytest -n 2)" in text
    assert orphan.alive() == dry_run
    assert left.exists() == dry_run and folder.exists() == dry_run
    assert bystander.alive() and f"process {bystander.pid} " not in text


def test_a_live_sessions_ledger_is_left_alone(tmp_path: Path) -> None:
    root = private_root(tmp_path)
    ledger = SessionLedger(root, session_id())
    mine = tmp_path / "zc-mine"
    mine.mkdir()
    ledger.add_dir(mine)
    assert not reap(root, thorough=True, temp_dir=tmp_path)
    assert mine.exists() and ledger.folder.exists()
    ledger.close()


def test_clean_reaps_a_group_whose_launcher_died_unless_a_live_session_owns_it(
    tmp_path: Path, start
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    base = {TAG_VAR: "zc-reaper-test", PID_DIR_VAR: str(pid_dir)}
    orphan = start(base)
    owned = start({**base, TAG_VAR: "zc-reaper-owned", OWNER_VAR: owner_value(session_id())})
    for proc in (orphan, owned):  # spawn records naming a parent that is gone
        (pid_dir / f"{proc.pid}-{proc.ticks}").write_text(json.dumps({"ppid": 2**22 + 1}))

    assert f"process {orphan.pid} " not in reap(None).describe()  # precise: not its business
    done = reap(private_root(tmp_path), thorough=True, temp_dir=tmp_path)
    assert f"process {orphan.pid} (" in done.describe()
    assert "its launcher (pid 4194305) is gone" in done.describe()
    assert not orphan.alive()
    assert owned.alive()


def test_clean_removes_unheld_temp_entries_and_keeps_held_ones(tmp_path: Path, start) -> None:
    stale = tmp_path / "torchelastic_abc"
    stale.mkdir()
    held = tmp_path / "zc-held"
    held.mkdir()
    (held / "pids").mkdir()
    start({PID_DIR_VAR: str(held / "pids")})  # a live process points into it
    other = tmp_path / "unrelated"
    other.mkdir()
    done = reap(private_root(tmp_path), thorough=True, temp_dir=tmp_path)
    assert f"entry {stale}: no live process holds it" in done.describe()
    assert not stale.exists()
    assert held.exists() and other.exists()


def test_the_clean_command_says_what_it_would_remove_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "zephon_state_r0").mkdir()
    assert cli_main(["clean", "--dry-run", "--temp-dir", str(tmp_path)]) == 0
    assert f"would remove:\n  entry {tmp_path / 'zephon_state_r0'}" in capsys.readouterr().out
    assert (tmp_path / "zephon_state_r0").exists()
    assert cli_main(["clean", "--temp-dir", str(tmp_path)]) == 0
    assert not (tmp_path / "zephon_state_r0").exists()
    assert cli_main(["clean", "--temp-dir", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
