"""The scenario model: JSON round trip, old files still load, and errors name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zephon_chaos.scenario import (
    SCENARIO_VERSION,
    Phase,
    Scenario,
    ScenarioError,
    checkpoints_before_faults,
)
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankFault


def two_phases(**pipeline: object) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=6, **pipeline),  # type: ignore[arg-type]
        phases=(Phase(2, 3, (CheckpointAt(2, 1),)), Phase(3, 2)),
    )


def test_json_round_trip_is_lossless() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=4, aggregation="dir"),
        phases=(
            Phase(
                2, 3, (CheckpointAt(0), CheckpointAt(2, 1)), rank_faults=(RankFault(1, 3, "raise"),)
            ),
            Phase(5, 1, expect_failure=True, expect_error="must be >= dp_degree"),
            Phase(1, 2),
        ),
        persist_format="json",
        run_id_policy="per_launch",
        plant="skip_sample",
    ).validate()
    again = Scenario.from_json(scenario.to_json())
    assert again == scenario


def test_a_file_written_before_the_newer_fields_still_loads(tmp_path: Path) -> None:
    """Version-1 files without expect_error, per-phase C, retry or backend keep loading."""
    raw = json.loads(two_phases().to_json())
    for phase in raw["phases"]:
        phase.pop("expect_error", None)
        phase.pop("canonical_replicas", None)
        phase.pop("retry", None)
    raw.pop("backend", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    assert Scenario.load(path) == two_phases()


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda raw: raw.update(version=SCENARIO_VERSION + 1), ".version"),
        (lambda raw: raw.update(colour="red"), "unknown field(s) colour"),
        (lambda raw: raw["phases"][0].update(world_size=0), "phases[0].world_size"),
        (lambda raw: raw["phases"][1].update(world_size=9), "phases[1].world_size"),
        (lambda raw: raw["phases"][0].update(checkpoints="x"), "phases[0].checkpoints"),
        (
            lambda raw: raw["phases"][0]["checkpoints"].append({"step": 9}),
            "phases[0].checkpoints[1]",
        ),
        (
            lambda raw: raw["phases"][0].update(
                rank_faults=[{"rank": 5, "at_step": 1, "action": "raise"}]
            ),
            "phases[0].rank_faults[0].rank",
        ),
        (lambda raw: raw["pipeline"].update(runner="gpu"), "pipeline.runner"),
        (lambda raw: raw.update(persist_format="yaml"), "persist_format"),
        (lambda raw: raw["phases"][0].update(checkpoints=[]), "phases[0].checkpoints"),
        (lambda raw: raw["phases"][0].update(retry="sometimes"), "phases[0].retry"),
    ],
    ids=[
        "newer-version",
        "unknown-field",
        "no-ranks",
        "more-ranks-than-lanes",
        "checkpoints-not-a-list",
        "checkpoint-past-the-end",
        "fault-on-a-missing-rank",
        "unknown-runner",
        "unknown-format",
        "nothing-to-restore",
        "unknown-retry",
    ],
)
def test_a_bad_file_names_the_field(tmp_path: Path, mutate, field: str) -> None:
    raw = json.loads(two_phases().to_json())
    mutate(raw)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ScenarioError) as err:
        Scenario.load(path)
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{not json", "not JSON"), ("[1, 2]", "expected a JSON object")],
)
def test_malformed_json_says_so(text: str, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment):
        Scenario.from_json(text, where="f.json")


def test_an_unreadable_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"cannot read scenario file .*missing\.json"):
        Scenario.load(tmp_path / "missing.json")


def test_checkpoints_that_land_on_one_batch_of_some_rank_are_refused() -> None:
    """C=3 on 2 ranks: rank 1 owns one lane, so 0+1 and 1 are both its first batch."""
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=3),
        phases=(Phase(2, 2, (CheckpointAt(0, 1), CheckpointAt(1))),),
    )
    with pytest.raises(ScenarioError, match=r"phases\[0\]\.checkpoints\[1\]: .*rank 1"):
        scenario.validate()


@pytest.mark.parametrize(
    ("checkpoints", "fault", "expected"),
    [
        ((CheckpointAt(1), CheckpointAt(2)), RankFault(0, 2, "raise"), 1),
        ((CheckpointAt(1), CheckpointAt(2)), RankFault(0, 3, "raise"), 2),
        ((CheckpointAt(1),), RankFault(1, 0, "sigkill"), 0),
        # Rank 0 owns lanes 0-1: 1+1 is its 3rd batch, before its fault at batch 4.
        ((CheckpointAt(1, 1),), RankFault(0, 2, "raise"), 1),
        # Rank 1 owns lane 2 only: 1+1 is a whole step there, at its fault's batch.
        ((CheckpointAt(1, 1),), RankFault(1, 2, "raise"), 0),
    ],
)
def test_checkpoints_before_a_fault(checkpoints, fault: RankFault, expected: int) -> None:
    assert checkpoints_before_faults(checkpoints, (fault,), 2, 3, "contiguous") == expected


def test_a_crashed_phase_hands_on_its_last_checkpoint_before_the_fault() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        phases=(
            Phase(2, 2, (CheckpointAt(1),)),
            Phase(
                2, 4, (CheckpointAt(1), CheckpointAt(3)), rank_faults=(RankFault(1, 2, "raise"),)
            ),
            Phase(2, 4, rank_faults=(RankFault(0, 0, "raise"),)),
            Phase(3, 1),
        ),
    ).validate()
    assert [scenario.restore_index(i) for i in range(4)] == [0, 0, None, None]


def test_a_refused_phase_hands_on_nothing() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        phases=(
            Phase(1, 1, (CheckpointAt(0, 1),)),
            Phase(3, 1, expect_failure=True),
            Phase(2, 1),
        ),
    ).validate()
    assert scenario.restore_index(1) is None
    assert scenario.reference_steps >= 2
