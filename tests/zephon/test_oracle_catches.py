"""The oracle fails when it should: planted loader defects, each caught with a readable diff."""

from __future__ import annotations

import pytest

from zephon_chaos.problem import ProblemKind
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.plants import PLANTS
from zephon_chaos.workload.spec import CheckpointAt

pytestmark = pytest.mark.cpu

# plant: (checkpoint of the first phase, evidence the verdict must show)
CAUGHT = {
    "skip_sample": (CheckpointAt(2), ["first divergent global step 2", "missing samples (1)"]),
    "duplicate_sample": (
        CheckpointAt(2),
        ["first divergent global step 2", "delivered more often than the reference"],
    ),
    "swap_lanes": (CheckpointAt(2), ["first divergent global step 2, lane 0"]),
    "off_by_one_step": (
        CheckpointAt(2),
        ["first divergent global step 2", "delivered 3 batches, expected 4"],
    ),
    "drop_lane": (CheckpointAt(2), ["lane 0 delivered 2 batches, expected 4", "never delivered"]),
    "skip_after_midwindow_resize": (
        CheckpointAt(1, 1),
        ["VIOLATION of mid-window contract", "window 1 holds other samples", "missing samples (1)"],
    ),
    "swap_draw_order": (
        CheckpointAt(2),
        ["phase 1: rank 0 drew out of the reference's order: draw 2", "from lane 1, actual"],
    ),
    "draw_lane_by_lane": (
        CheckpointAt(2),
        ["phase 1: rank 0 drew out of the reference's order: draw 1", "rank 0 trained step 2"],
    ),
}


def test_every_plant_has_a_row() -> None:
    assert set(CAUGHT) == set(PLANTS)


@pytest.mark.parametrize("plant", sorted(CAUGHT))
def test_a_planted_defect_is_caught_with_its_evidence(resume_check, plant: str) -> None:
    checkpoint, evidence = CAUGHT[plant]
    scenario = Scenario(
        launches=(Launch(2, checkpoint.step + 1, (checkpoint,)), Launch(3, 2)),
        plant=plant,
        name=f"plant-{plant}",
    )
    outcome = resume_check(scenario)
    assert outcome.verdict is not None and not outcome.ok
    text = outcome.verdict.describe()
    for fragment in evidence:
        assert fragment in text, f"{fragment!r} missing from:\n{text}"
    assert "expected [" in text and "actual" in text


@pytest.mark.parametrize(
    ("plant", "kinds"),
    [
        ("swap_draw_order", {ProblemKind.RANK_SEQUENCE_DIVERGED}),
        (
            "draw_lane_by_lane",
            {ProblemKind.RANK_SEQUENCE_DIVERGED, ProblemKind.TRAINER_STEP_DIVERGED},
        ),
    ],
)
def test_a_reordered_draw_is_caught_where_every_lane_stream_holds(
    resume_check, plant: str, kinds: set[ProblemKind]
) -> None:
    """Same lanes, mid-window: rank 0 goes on with its turn at lane 1, then draws out of it.
    Every lane's stream is the reference's; only what rank 0's trainer consumed is not."""
    scenario = Scenario(
        launches=(Launch(2, 2, (CheckpointAt(1, 1),)), Launch(2, 2)),
        plant=plant,
        name=f"plant-{plant}-same-lanes",
    )
    outcome = resume_check(scenario)
    verdict = outcome.verdict
    assert verdict is not None and verdict.draws is not None
    assert not verdict.ok and verdict.streams_ok, verdict.describe()
    assert verdict.first_divergence is None and not verdict.missing and not verdict.duplicated
    assert {p.kind for p in verdict.problems} == kinds
    assert {(p.phase, p.rank) for p in verdict.problems} == {(1, 0)}
    [seq] = verdict.draws.sequences()
    assert seq.position == 0
    assert seq.expected is not None and seq.actual is not None
    assert seq.expected[0] != seq.actual[0]  # another lane, that lane's own next batch
