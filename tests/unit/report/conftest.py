from __future__ import annotations

import json
from pathlib import Path

import pytest

from zephon_chaos.launch.result import GroupResult, RankOutcome

STUCK_STACK = """\
Thread 4242 (idle): "MainThread"
    barrier (/venv/lib/python3.11/site-packages/torch/distributed/c10d.py:4159)
    train_step (/work/train.py:42)
    <module> (/work/train.py:64)
"""


@pytest.fixture
def failed_group(tmp_path: Path) -> GroupResult:
    """A finished group (no launch): rank 1 SIGKILLed by someone else, rank 0 stuck."""
    work = tmp_path / "group"
    rank_dir = work / "logs" / "agent0" / "run" / "attempt_0"
    for local in (0, 1):
        (rank_dir / str(local)).mkdir(parents=True)
        (rank_dir / str(local) / "stdout.log").write_text(f"rank {local} says hello\n")
        (rank_dir / str(local) / "stderr.log").write_text("")
    (rank_dir / "1" / "error.json").write_text(
        json.dumps({"message": {"message": "boom", "extraInfo": {"timestamp": "1700000010"}}})
    )
    pids = work / "pids"
    pids.mkdir()
    for pid in (111, 4242, 4343):
        (pids / f"{pid}-1").write_text(json.dumps({"argv": ["train.py"]}))
    agent_log = work / "agent0-attempt1.log"
    agent_log.write_text("agent log line\n")
    ranks = [
        RankOutcome(
            0,
            0,
            0,
            4242,
            -9,
            rank_dir / "0" / "stdout.log",
            rank_dir / "0" / "stderr.log",
            killed_by_harness=True,
        ),
        RankOutcome(
            1,
            1,
            0,
            4343,
            -9,
            rank_dir / "1" / "stdout.log",
            rank_dir / "1" / "stderr.log",
            error="boom",
            kernel_note="kernel log: Killed process 4343 (python)",
        ),
    ]
    return GroupResult(
        name="g0",
        agent_returncodes=[1],
        ranks=ranks,
        timed_out=False,
        duration_s=3.5,
        workdir=work,
        agent_logs=[agent_log],
        first_failure=ranks[1],
        stacks={"rank 0 (pid 4242)": STUCK_STACK},
        attempts=2,
        notes=["note: static port was busy; launched 2 times"],
    )
