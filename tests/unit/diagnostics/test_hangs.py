"""Hang diagnosis on real groups: at the deadline every rank's and agent's stack is captured,
each stuck frame is named, and the report is ready within deadline + 10 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.diagnostics.events import wait_for_files

pytestmark = pytest.mark.cpu

DEADLINE_S = 10.0
CAPTURE_AND_KILL_S = 10.0

HANGS = {
    # how: (the hanging rank's stuck function, a line its stack shows)
    "busy_loop": "busy_loop",
    "store_wait": "wait_for_a_key_nobody_sets",
    "sigstop": "stop_myself",
}


def _hang(torchrun_group, hang_script: Path, tmp_path: Path, how: str):
    ready = tmp_path / "ready"
    ready.mkdir()
    group = torchrun_group.spawn(
        hang_script,
        nproc=2,
        env={"HANG_HOW": how, "HANG_READY_DIR": str(ready)},
        deadline_s=DEADLINE_S,
        name=f"hang-{how}",
    )
    announced_after = wait_for_files(
        [ready / "rank0", ready / "rank1"],
        lambda: all(a.poll() is None for a in group.agents),
        limit_s=120,
    )
    return group, group.wait(), announced_after


@pytest.mark.parametrize("how", sorted(HANGS))
def test_a_hang_is_reported_with_every_stack_and_the_stuck_frame(
    torchrun_group, hang_script: Path, tmp_path: Path, how: str
) -> None:
    group, result, announced_after = _hang(torchrun_group, hang_script, tmp_path, how)

    assert result.timed_out and not result.ok
    labels = list(result.stacks)
    pids = {o.rank: o.pid for o in result.ranks}
    assert f"rank 0 (pid {pids[0]})" in labels and f"rank 1 (pid {pids[1]})" in labels, labels
    assert f"agent 0 (pid {group.agents[0].pid})" in labels, labels
    for label in labels:
        assert "no stack captured" not in result.stacks[label], result.stacks[label]

    stuck = result.stuck_frames()
    assert stuck[f"rank 1 (pid {pids[1]})"].startswith(HANGS[how]), stuck
    assert stuck[f"rank 0 (pid {pids[0]})"].startswith("wait_in_barrier"), stuck
    summary = result.summary()
    assert f"rank 1 (pid {pids[1]}): {HANGS[how]} (scripts/hang.py:" in summary, summary
    assert HANGS[how] in result.report() and "--- stacks of agent 0" in result.report()

    # The verdict comes at most 10 s after the deadline (or after the ranks were ready, when a
    # loaded machine made them slower than the deadline).
    assert result.duration_s <= max(DEADLINE_S, announced_after) + CAPTURE_AND_KILL_S
    assert group.registry.survivors() == []


@pytest.mark.slow
def test_without_ptrace_faulthandler_gives_the_stacks(
    torchrun_group, hang_script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZEPHON_CHAOS_PYSPY", "off")
    group, result, _ = _hang(torchrun_group, hang_script, tmp_path, "sigstop")

    pids = {o.rank: o.pid for o in result.ranks}
    stopped = result.stacks[f"rank 1 (pid {pids[1]})"]
    assert stopped.startswith("(via faulthandler)")
    assert "faulthandler cannot run in a stopped process" in stopped
    assert result.stuck_frames()[f"rank 1 (pid {pids[1]})"].startswith("stop_myself")
    assert result.stuck_frames()[f"rank 0 (pid {pids[0]})"].startswith("wait_in_barrier")
    assert group.registry.survivors() == []
