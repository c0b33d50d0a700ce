"""The oracle fails when it should: planted loader defects, each caught with a readable diff."""

from __future__ import annotations

import pytest

from zephon_chaos.scenario import Phase, Scenario
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
}


def test_every_plant_has_a_row() -> None:
    assert set(CAUGHT) == set(PLANTS)


@pytest.mark.parametrize("plant", sorted(CAUGHT))
def test_a_planted_defect_is_caught_with_its_evidence(resume_check, plant: str) -> None:
    checkpoint, evidence = CAUGHT[plant]
    scenario = Scenario(
        phases=(Phase(2, checkpoint.step + 1, (checkpoint,)), Phase(3, 2)),
        plant=plant,
        name=f"plant-{plant}",
    )
    outcome = resume_check(scenario)
    assert outcome.verdict is not None and not outcome.ok
    text = outcome.verdict.describe()
    for fragment in evidence:
        assert fragment in text, f"{fragment!r} missing from:\n{text}"
    assert "expected [" in text and "actual" in text
