"""The example recipe on nccl: one elastic resume and one fault scenario, run by gpu-check.sh.

Model and optimizer state live on CUDA and go through DCP; the loader state through the
aggregation round. NCCL needs one device per rank: with one device the "resize" is 1 → 1
(a resume across launches), with two or more it is 2 → 1. Not part of the suite's test
paths: ``python3 -m pytest scripts/gpu_recipe_checks.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "examples" / "recipe" / "train.py"

CASES = {
    # name: (fault, fault_rank)
    "elastic-resume-after-preemption": ("preempt", 0),
    "killed-rank-resumes": ("sigkill", 0),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_recipe_on_nccl(recipe_run, cuda_devices: int, record_property, case: str) -> None:  # type: ignore[no-untyped-def]
    fault, fault_rank = CASES[case]
    sizes = [2, 1] if cuda_devices >= 2 else [1, 1]
    record_property("world_sizes", "→".join(map(str, sizes)))
    outcome = recipe_run(
        TRAIN,
        world_sizes=sizes,
        canonical_replicas=2,
        steps=4,
        checkpoint_every=2,
        interrupt_at=[3],
        fault=fault,
        fault_rank=fault_rank,
        backend="nccl",
    )
    assert outcome.ok, outcome.report()
    reference = outcome.reference_notes("trained")[0]["param_sum"]
    resumed = outcome.notes("trained")[0]["param_sum"]
    assert resumed == pytest.approx(reference, rel=1e-4), outcome.report()
    for run in outcome.phases:
        record_property(f"phase{run.index}_s", round(run.result.duration_s, 1))
