"""The kernel's evidence for an OOM kill, and the words when it cannot be read."""

from __future__ import annotations

from pathlib import Path

from zephon_chaos.diagnostics.kernel import oom_evidence, read_kernel_log
from zephon_chaos.launch.result import RankOutcome

LOG = [
    "Out of memory: Killed process 12345 (python) total-vm:1000kB, anon-rss:900kB",
    "oom-kill:constraint=CONSTRAINT_NONE,task=python,pid=777,uid=0",
    "oom_reaper: reaped process 12345 (python), now anon-rss:0kB",
    "usb 1-1: new device",
]


def test_oom_lines_naming_the_pid_are_the_evidence() -> None:
    evidence = oom_evidence(12345, (LOG, ""))
    assert evidence.readable and evidence.oom_killed
    assert len(evidence.lines) == 2
    assert "Killed process 12345" in evidence.describe()
    assert oom_evidence(777, (LOG, "")).oom_killed


def test_a_pid_that_only_shares_digits_is_not_evidence() -> None:
    evidence = oom_evidence(1234, (LOG, ""))
    assert evidence.readable and not evidence.oom_killed
    assert "records no OOM kill of pid 1234" in evidence.describe()


def test_an_unreadable_kernel_log_is_said_so_with_the_way_out(tmp_path: Path) -> None:
    lines, why = read_kernel_log(str(tmp_path / "no-kmsg"))
    assert lines is None and "no-kmsg" in why
    evidence = oom_evidence(42, (lines, why))
    assert not evidence.readable
    assert "kernel log not readable here" in evidence.describe()
    assert "dmesg" in evidence.describe()


def test_a_sigkill_nobody_in_the_harness_sent_carries_the_kernels_word() -> None:
    outcome = RankOutcome(rank=1, local_rank=1, node=0, pid=2**22 + 17, exitcode=-9)
    status = outcome.status
    assert status.startswith("killed by SIGKILL (not sent by the harness: possibly the kernel's")
    words = ("records no OOM kill", "not readable", "kernel log:")
    assert any(w in status for w in words), status
    harness = RankOutcome(rank=0, local_rank=0, node=0, pid=1, exitcode=-9, killed_by_harness=True)
    assert harness.status == "killed by SIGKILL"
