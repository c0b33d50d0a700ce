"""The checkpoint oracle names each problem by its kind, checkpoint and rank, as values."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zephon_chaos.oracles.checkpoints import MID_WINDOW_TEXT, check
from zephon_chaos.problem import Area, ProblemKind
from zephon_chaos.workload.records import CheckpointEvent, RankRecord

LANES = {0: 2, 1: 2}


def event(**changes: object) -> CheckpointEvent:
    """Checkpoint 0 taken on a window boundary, merged over both lanes."""
    fields: dict[str, object] = {
        "lane_counts": dict(LANES),
        "digest": "d",
        "lanes_covered": [0, 1],
    }
    fields.update(changes)
    return CheckpointEvent(0, 2, bool(fields.pop("ok", True)), **fields)  # type: ignore[arg-type]


def group(rank1: CheckpointEvent | None) -> list[RankRecord]:
    """Rank 0 with a good checkpoint 0, rank 1 with ``rank1`` (or none)."""
    return [
        RankRecord(rank=0, world_size=2, checkpoints=[event()]),
        RankRecord(rank=1, world_size=2, checkpoints=[rank1] if rank1 else []),
    ]


def test_a_good_checkpoint_has_no_problem() -> None:
    assert check(group(event()), 2).problems == []


@pytest.mark.parametrize(
    ("records", "kind", "rank"),
    [
        (lambda: group(event(ok=False, error="boom")), ProblemKind.FAILED, 1),
        (lambda: group(None), ProblemKind.MISSING_RECORD, 1),
        (lambda: group(event(digest="other")), ProblemKind.DIFFERS, None),
        (lambda: group(event(lanes_covered=[0])), ProblemKind.COVERAGE, 1),
        (lambda: group(event(warnings=[MID_WINDOW_TEXT])), ProblemKind.SPURIOUS_WARNING, 1),
        (
            lambda: [
                RankRecord(rank=r, world_size=2, checkpoints=[event(lane_counts={0: 2, 1: 1})])
                for r in range(2)
            ],
            ProblemKind.NO_WARNING,
            None,
        ),
    ],
    ids=["failed", "missing-record", "differs", "coverage", "spurious-warning", "no-warning"],
)
def test_each_problem_is_a_value_with_its_kind_and_place(
    records: Callable[[], list[RankRecord]], kind: ProblemKind, rank: int | None
) -> None:
    [problem] = check(records(), 2).problems
    assert (problem.area, problem.kind, problem.checkpoint, problem.rank) == (
        Area.CHECKPOINT,
        kind,
        0,
        rank,
    )
    assert problem.in_phase(3).text == f"phase 3: {problem.text}"
    assert problem.in_phase(3).phase == 3
