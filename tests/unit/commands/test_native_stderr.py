"""Native writes to descriptor 2 go to the report's file; Python's stderr stays on the terminal."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from zephon_chaos.commands.native_stderr import native_stderr_to


def test_native_writes_go_to_the_file_and_python_writes_to_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "report" / "native.log"
    before = sys.stderr
    with native_stderr_to(log):
        os.write(2, b"[W c10d] recvValue failed\n")
        print("explore [inproc] searching", file=sys.stderr)
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    assert "explore [inproc] searching" in err
    assert "recvValue" not in err
    assert "after" in err  # descriptor 2 is back
    assert sys.stderr is before
    assert log.read_text() == "[W c10d] recvValue failed\n"


def test_a_captured_stderr_stays_captured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with native_stderr_to(tmp_path / "native.log"):
        print("progress", file=sys.stderr)
    assert capsys.readouterr().err == "progress\n"


def test_the_python_writes_of_diverted_threads_go_to_the_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Zephon's log lines in an in-process rank join the native lines; progress stays."""
    import threading

    log = tmp_path / "native.log"

    def rank() -> None:
        print("[PR 0][PID 1] Failed to publish checkpoint failure", file=sys.stderr)

    with native_stderr_to(log, divert=lambda: threading.current_thread().name == "rank0"):
        thread = threading.Thread(target=rank, name="rank0")
        thread.start()
        thread.join()
        print("explore [inproc] searching", file=sys.stderr)
    err = capfd.readouterr().err
    assert "explore [inproc] searching" in err and "Failed to publish" not in err
    assert log.read_text() == "[PR 0][PID 1] Failed to publish checkpoint failure\n"
