"""The spawn hook's PID record: one JSON object per process, whatever it exec'd before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from zephon_chaos.procs import SPAWNHOOK_DIR


def test_a_process_that_execs_a_shorter_command_keeps_a_whole_record(tmp_path: Path) -> None:
    """An exec keeps the PID and its start ticks, so the second interpreter rewrites the
    first one's file: a shorter record must not leave the longer one's tail behind."""
    env = {**os.environ, "PYTHONPATH": SPAWNHOOK_DIR, "ZEPHON_CHAOS_PID_DIR": str(tmp_path)}
    execs = "import os, sys; os.execv(sys.executable, [sys.executable, '-c', 'pass'])"
    long_argv = [sys.executable, "-c", execs, "a-long-argument" * 20, "another"]
    subprocess.run(long_argv, env=env, check=True, timeout=60)
    (record,) = [p for p in tmp_path.iterdir() if p.is_file()]
    assert json.loads(record.read_text())["argv"] == ["-c"]


def test_the_rank_side_knows_the_hook_by_its_mark() -> None:
    from zephon_chaos.procs._spawnhook import sitecustomize
    from zephon_chaos.workload.spawn_hook import HOOK_MARK

    assert getattr(sitecustomize, HOOK_MARK) is True
