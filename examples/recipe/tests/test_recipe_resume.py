"""The recipe resumes exactly after a crash, a preemption, and on other world sizes.

These tests are what a recipe's own repository would hold: they use only the zephon-chaos
plugin's public fixtures, loaded through its ``pytest11`` entry point, and import nothing
from ``zephon_chaos``. ``recipe_run`` launches ``train.py`` under torchrun, interrupts it,
resumes it from its last complete checkpoint (DCP model + loader state) on the next world
size, and compares every global batch with an uninterrupted run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "train.py"


def assert_model_resumed(outcome) -> None:  # type: ignore[no-untyped-def]
    """Same batches and a restored optimizer: the resumed model ends where the reference does."""
    reference = outcome.reference_notes("trained")[0]
    resumed = outcome.notes("trained")[0]
    assert resumed["param_sum"] == pytest.approx(reference["param_sum"], rel=1e-4), (
        f"the resumed model diverged: {resumed} vs the reference {reference}"
    )


@pytest.mark.cpu
@pytest.mark.chaos
def test_a_killed_rank_resumes_on_half_the_ranks(recipe_run) -> None:  # type: ignore[no-untyped-def]
    outcome = recipe_run(
        TRAIN,
        world_sizes=[2, 1],
        canonical_replicas=2,
        steps=4,
        checkpoint_every=2,
        interrupt_at=[3],
        fault="sigkill",
        fault_rank=1,
    )
    assert outcome.ok, outcome.report()
    crashed, resumed = outcome.phases
    assert crashed.fault_fired and not crashed.result.ok
    assert resumed.start_step == 2 and resumed.restored_from is not None
    assert_model_resumed(outcome)


@pytest.mark.cpu
@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.parametrize(
    ("world_sizes", "fault"),
    [([1, 2], "preempt"), ([2, 2], "raise"), ([2, 1, 2], "sigterm")],
    ids=["preempted-1-2", "raise-2-2", "sigterm-2-1-2"],
)
def test_more_interruptions_and_trajectories(recipe_run, world_sizes, fault) -> None:  # type: ignore[no-untyped-def]
    outcome = recipe_run(
        TRAIN,
        world_sizes=world_sizes,
        canonical_replicas=2,
        steps=6,
        checkpoint_every=2,
        fault=fault,
        fault_rank=0,
    )
    assert outcome.ok, outcome.report()
    assert [p.start_step for p in outcome.phases] == [0, 2, 4][: len(world_sizes)]
    assert_model_resumed(outcome)
