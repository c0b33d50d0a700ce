"""The scenario runner's restore choice: the next launch restores a checkpoint that survived."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.oracles.checkpoints import CheckpointFacts, CheckpointVerdict
from zephon_chaos.runner import PhaseRun, Resume, surviving_checkpoint
from zephon_chaos.scenario import Launch
from zephon_chaos.workload.spec import CheckpointAt, WorkloadSpec


def facts(
    index: int, ok: list[int], failed: tuple[int, ...] = (), lanes: int = 0
) -> CheckpointFacts:
    return CheckpointFacts(
        index=index,
        ok_ranks=ok,
        failed={r: "RuntimeError: round failed" for r in failed},
        digests={r: "d" for r in ok},
        lane_counts={0: lanes, 1: lanes},
        covered={r: [0, 1] for r in ok},
        warned=[],
    )


@pytest.mark.parametrize(
    ("taken", "expected"),
    [
        ([facts(0, [0, 1]), facts(1, [0, 1])], 1),
        # A fault on the leader's link at 'outcome': followers finished checkpoint 1, rank 0
        # never did, so never persisted it (launch.CheckpointFileError.resized.boundary).
        ([facts(0, [0, 1]), facts(1, [1])], 0),
        ([facts(0, [0, 1]), facts(1, [0], failed=(1,))], 0),
        ([facts(0, [1])], None),
        ([], None),
    ],
    ids=["all-completed", "leader-never-finished", "a-rank-failed", "none-persisted", "none"],
)
def test_the_next_launch_restores_the_last_checkpoint_rank_0_persisted(
    taken: list[CheckpointFacts], expected: int | None
) -> None:
    assert surviving_checkpoint(taken) == expected


def test_expected_lane_counts_follow_the_checkpoint_restored(tmp_path: Path) -> None:
    spec = WorkloadSpec(
        steps=3, checkpoints=(CheckpointAt(1), CheckpointAt(2)), out_dir=str(tmp_path)
    )
    taken = [facts(0, [0, 1], lanes=1), facts(1, [1], lanes=2)]
    result = GroupResult("g", [1], [], False, 1.0, tmp_path, [])
    run = PhaseRun(
        0, Launch(2, 3, spec.checkpoints), spec, result, [], CheckpointVerdict(False, taken)
    )
    track = Resume()
    assert run.restore_index == 0
    track = track.keep(run, run.restore_index)
    assert track.restore_from == str(spec.checkpoint_path(0))
    assert track.expected == {0: 1, 1: 1}


def test_what_the_verdict_compares_names_the_launch_it_is_of(tmp_path: Path) -> None:
    spec = WorkloadSpec(steps=2, checkpoints=(CheckpointAt(1),), out_dir=str(tmp_path))
    result = GroupResult("g", [0], [], False, 1.0, tmp_path, [])
    taken = CheckpointVerdict(True, [facts(0, [0, 1], lanes=1)])
    runs = [PhaseRun(i, Launch(2, 2, spec.checkpoints), spec, result, [], taken) for i in (0, 1)]
    track = Resume().keep(runs[0], 0).keep_all(runs[1], range(2), [])
    assert [(k.phase, k.keep_before_checkpoint) for k in track.kept] == [(0, 1), (1, None)]
