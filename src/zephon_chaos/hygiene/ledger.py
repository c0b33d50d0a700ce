"""The session ledger: what a live pytest session has out there, readable after it crashed.

``$TMPDIR/zephon-chaos-<uid>/sessions/<session>/`` (0700) holds ``ledger.json`` (the session's
process, its command line, every group registry's tag and PID directory, every private
directory it made) and the per-test temp directories. A session that ends normally removes
its folder; one that was SIGKILLed (a dying xdist worker, a cancelled CI job) leaves it for
the next session's start-up or ``zephon-chaos clean`` to act on.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from zephon_chaos.hygiene.owner import session_alive

SESSIONS = "sessions"
LEDGER_FILE = "ledger.json"


@dataclass
class LedgerRecord:
    session: str
    argv: list[str] = field(default_factory=list)
    cwd: str = ""
    started: float = 0.0
    tags: list[str] = field(default_factory=list)
    pid_dirs: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


class SessionLedger:
    """The ledger of this session; every change is written at once (atomically)."""

    def __init__(self, root: Path, session: str) -> None:
        self.folder = root / SESSIONS / session
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.record = LedgerRecord(
            session=session, argv=sys.argv[:12], cwd=os.getcwd(), started=time.time()
        )
        self._tests = 0
        self.write()

    def add_registry(self, tag: str, pid_dir: Path) -> None:
        self.record.tags.append(tag)
        self.record.pid_dirs.append(str(pid_dir))
        self.write()

    def add_dir(self, path: Path) -> None:
        self.record.dirs.append(str(path))
        self.write()

    def new_test_dir(self) -> Path:
        """A fresh private directory for one test's TMPDIR, inside the session's folder."""
        self._tests += 1
        path = self.folder / f"t{self._tests}"
        path.mkdir(mode=0o700)
        return path

    def write(self) -> None:
        tmp = self.folder / f".{LEDGER_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self.record), indent=1))
        os.replace(tmp, self.folder / LEDGER_FILE)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def read_ledgers(root: Path) -> list[tuple[Path, LedgerRecord]]:
    """Every session folder under ``root`` with its ledger (an unreadable one: empty record)."""
    out: list[tuple[Path, LedgerRecord]] = []
    with contextlib.suppress(OSError):
        for folder in sorted((root / SESSIONS).iterdir()):
            if not folder.is_dir():
                continue
            try:
                data = json.loads((folder / LEDGER_FILE).read_text())
                record = LedgerRecord(**{k: data[k] for k in LedgerRecord.__dataclass_fields__
                                         if k in data})
            except (OSError, ValueError, TypeError):
                record = LedgerRecord(session=folder.name)
            out.append((folder, record))
    return out


def stale_ledgers(root: Path) -> list[tuple[Path, LedgerRecord]]:
    """Ledgers whose session process is gone."""
    return [(f, r) for f, r in read_ledgers(root) if not session_alive(f.name)]


def live_paths(root: Path) -> set[str]:
    """Directories that live sessions listed: never touched by a clean."""
    paths: set[str] = set()
    for folder, record in read_ledgers(root):
        if session_alive(folder.name):
            paths.add(str(folder))
            paths.update(record.dirs)
            paths.update(record.pid_dirs)
    return paths
