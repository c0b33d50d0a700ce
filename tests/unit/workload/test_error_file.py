"""The workload's error file: torch's format, and never visible half-written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the error file's format is torchelastic's")

from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
from torch.distributed.elastic.multiprocessing.errors import record as torch_record

from zephon_chaos.workload import atomic
from zephon_chaos.workload.error_file import record


def failing() -> None:
    raise ValueError("bad C")


def test_the_error_file_reads_as_torchelastic_reads_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = {}
    for name, wrap in (("ours", record), ("torch's", torch_record)):
        path = tmp_path / name / "error.json"
        path.parent.mkdir()
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
        with pytest.raises(ValueError, match="bad C"):
            wrap(failing)()
        read[name] = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(path))
        assert [p.name for p in path.parent.iterdir()] == ["error.json"]
    ours, theirs = read["ours"], read["torch's"]
    assert ours.message["message"] == theirs.message["message"] == "ValueError: bad C"
    assert ours.message["extraInfo"].keys() == theirs.message["extraInfo"].keys()
    assert "in failing" in ours.message["extraInfo"]["py_callstack"]
    assert abs(ours.timestamp - theirs.timestamp) <= 1


def test_the_error_file_appears_only_once_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the rename, a reader (the agent) finds no file at the error file's name."""
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    seen: list[tuple[bool, dict]] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append((Path(dst).exists(), json.loads(Path(src).read_text())))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(ValueError):
        record(failing)()
    assert len(seen) == 1
    existed, data = seen[0]
    assert not existed and data["message"]["message"] == "ValueError: bad C"
    assert json.loads(path.read_text()) == data


RAISES_THEN_TEARS_DOWN = """
import atexit, sys, time
from pathlib import Path
from zephon_chaos.workload.error_file import record

# Registered after the spawn hook's own handler, so it runs first, as the teardown of an
# MTP child or a process group does: a failing rank's peers see it before its exit note.
atexit.register(lambda: Path(sys.argv[1]).write_text(repr(time.monotonic())))

def main():
    raise ValueError("canonical_replicas (3) must be >= dp_degree (4)")

record(main)()
"""


def test_a_rank_notes_when_its_error_leaves_main_before_any_teardown(tmp_path: Path) -> None:
    """Ranks that raised are ordered by these notes: the exit note comes after the rank's
    own atexit teardown, which a peer may fail of first (a reset connection) and would
    then be named the cause."""
    import subprocess
    import sys

    from zephon_chaos.procs import SPAWNHOOK_DIR, exit_notes, raise_notes

    pythonpath = os.pathsep.join([SPAWNHOOK_DIR, *sys.path])
    env = {**os.environ, "PYTHONPATH": pythonpath, "ZEPHON_CHAOS_PID_DIR": str(tmp_path)}
    env["TORCHELASTIC_ERROR_FILE"] = str(tmp_path / "error.json")
    teardown = tmp_path / "teardown"
    proc = subprocess.run(
        [sys.executable, "-c", RAISES_THEN_TEARS_DOWN, str(teardown)], env=env, timeout=120
    )
    assert proc.returncode == 1
    (raised,) = raise_notes(tmp_path).values()
    (exited,) = exit_notes(tmp_path).values()
    assert raised < float(teardown.read_text()) < exited
