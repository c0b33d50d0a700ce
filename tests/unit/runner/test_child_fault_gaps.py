"""A child fault that did not do what its scenario says is a harness problem, never a pass:
it left no record, found no worker to kill, or (mid-launch) was never answered by a
replacement worker, so the batches after it came from Zephon's buffers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.runner.test_fate import launch
from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.runner.checks import child_fault_gaps
from zephon_chaos.scenario import Launch
from zephon_chaos.workload.records import RankRecord
from zephon_chaos.workload.spec import ChildFault

STEPS = 10
MID, LAST = 3, STEPS
KILLED = [101, 102]


def fired(at_step: int, killed: list[int], target: str = "workers") -> dict[str, Any]:
    """The child-fault record ``_kill_children`` writes on the killing rank."""
    return {
        "kind": "child-fault",
        "at_step": at_step,
        "target": target,
        "at": 5.0,
        "killed": killed,
        "before": [*killed, 103] if target == "worker" else killed,
    }


def workers(*pids: int) -> dict[str, Any]:
    """The rank's live workers after its last batch (the ``workers`` record)."""
    return {"kind": "workers", "pids": list(pids)}


def gaps(
    tmp_path: Path,
    at_step: int,
    events: dict[int, list[dict[str, Any]]],
    ok: bool = True,
    target: str = "workers",
) -> list[tuple[HarnessGap, str]]:
    """The gaps of launch 1 of two ranks whose rank 0 kills its workers before ``at_step``."""
    phase = Launch(2, STEPS, child_faults=(ChildFault(0, at_step, target),))
    run = launch(tmp_path, phase, ok, [], index=1)
    run.records = [RankRecord(rank=r, events=events.get(r, [])) for r in range(2)]
    return [(g.gap, g.detail) for g in child_fault_gaps(run)]


@pytest.mark.parametrize(
    ("at_step", "events", "why"),
    [
        (MID, {}, "left no record"),
        (MID, {1: [fired(MID, KILLED)]}, "left no record"),  # another rank's record
        (MID, {0: [fired(MID, [])]}, "found no worker process to kill"),
        (LAST, {0: [fired(LAST, [])]}, "found no worker process to kill"),
        (MID, {0: [fired(MID, KILLED)]}, "never answered by a replacement"),
        (MID, {0: [fired(MID, KILLED), workers(*KILLED)]}, "never answered by a replacement"),
        (MID, {0: [fired(MID, KILLED), workers(KILLED[0])]}, "never answered by a replacement"),
    ],
    ids=[
        "no-record",
        "record-on-another-rank",
        "killed-nothing",
        "killed-nothing-at-the-last-step",
        "mid-no-workers-record",
        "mid-only-the-killed-alive",
        "mid-some-of-the-killed-alive",
    ],
)
def test_a_child_fault_that_tested_nothing_is_a_harness_gap(
    tmp_path: Path, at_step: int, events: dict[int, list[dict[str, Any]]], why: str
) -> None:
    """Each way a completed launch's child fault can miss is named, in the launch it was in."""
    [(gap, detail)] = gaps(tmp_path, at_step, events)
    assert gap is HarnessGap.CHILD_FAULT_MISSED
    assert detail.startswith("phase 1: ") and why in detail


@pytest.mark.parametrize(
    ("at_step", "events"),
    [
        (MID, {0: [fired(MID, KILLED), workers(201, 202)]}),
        (MID, {0: [fired(MID, KILLED), workers(KILLED[0], 201)]}),
        (LAST, {0: [fired(LAST, KILLED)]}),
        (LAST, {0: [fired(LAST, KILLED), workers(*KILLED)]}),
    ],
    ids=["mid-replaced", "mid-one-replacement", "last-no-workers-record", "last-none-replaced"],
)
def test_a_child_fault_that_acted_is_no_gap(
    tmp_path: Path, at_step: int, events: dict[int, list[dict[str, Any]]]
) -> None:
    """Mid-launch, a replacement alive at the end shows the rank needed one; at the last
    step no batch is left to need one, so killing workers is all the fault must do."""
    assert gaps(tmp_path, at_step, events) == []


def test_a_failed_launch_is_judged_by_its_failure_not_by_its_child_fault(tmp_path: Path) -> None:
    """A launch that failed has a problem of its own; its missing record is no harness gap."""
    assert gaps(tmp_path, MID, {}, ok=False) == []
    assert gaps(tmp_path, MID, {}, ok=True), "the same launch, completed, is one"


def test_one_killed_worker_of_several_needs_no_replacement_by_the_end(tmp_path: Path) -> None:
    """The others serve the tail while the watchdog's poll comes round: a kill of one worker
    must only have killed it, and one that found none is still a gap."""
    one = [KILLED[0]]
    unreplaced = {0: [fired(MID, one, "worker"), workers(*one)]}
    assert gaps(tmp_path, MID, unreplaced, target="worker") == []
    [(gap, _)] = gaps(tmp_path, MID, {0: [fired(MID, [], "worker")]}, target="worker")
    assert gap is HarnessGap.CHILD_FAULT_MISSED
