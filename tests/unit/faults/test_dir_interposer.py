"""The interposer of ``aggregate_dir``: round files classified, triggers fired, per pipeline.

Two ranks run as threads of this process (the workload's own loop, ``run_rank``) over one
shared ``aggregate_dir``; evidence is each rank's event file and records, never a return
value of ours.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.faults.rank_threads import (
    assert_dropped_ack_splits,
    phases_written,
    run_rank_threads,
)
from zephon_chaos.faults.dir_interposer import (
    DIR_PHASES,
    DirInterposerError,
    NoFileCounterpart,
    absent_on_dir,
    check_plan,
    outcome_of_file,
    phase_of_file,
)
from zephon_chaos.faults.interposer import InterposerPlan, events_path, read_events
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.workload.records import read_phase
from zephon_chaos.workload.spec import (
    CheckpointAt,
    PhaseTrigger,
    PipelineSpec,
    WorkloadSpec,
)

AGG = "/shared/agg/run-0/.zephon_agg"
TIMEOUT_S = 1.0


@pytest.mark.parametrize(
    ("path", "phase"),
    [
        (f"{AGG}/round.current", "announce"),
        (f"{AGG}/state_r1_w0_p4242_1719.ckpt", "shard"),
        (f"{AGG}/state_r1_w0_p4242_1719.ckpt.ack", "ack"),
        (f"{AGG}/merged_1719.ckpt", "outcome"),
        (f"{AGG}/failed_1719.txt", "outcome"),
        (f"{AGG}/state_r1_w0_p4242_1719.ckpt.tmp", None),
        ("/shared/agg/run-0/round.current", None),
        (f"{AGG}/notes.txt", None),
    ],
)
def test_a_file_write_is_classified_by_its_place_in_the_round(path: str, phase: str) -> None:
    assert phase_of_file(path) == phase


def test_the_outcome_file_says_result_or_failure() -> None:
    assert outcome_of_file(f"{AGG}/merged_1.ckpt") == "result"
    assert outcome_of_file(f"{AGG}/failed_1.txt") == "failure"


def test_participants_has_no_file_counterpart_and_a_trigger_on_it_is_refused() -> None:
    assert absent_on_dir("participants") is NoFileCounterpart.PARTICIPANTS
    assert DIR_PHASES == ("announce", "shard", "outcome", "ack")
    assert all(absent_on_dir(p) is None for p in DIR_PHASES)
    plan = InterposerPlan(rank=1, triggers=(PhaseTrigger(1, "participants", "raise"),))
    with pytest.raises(DirInterposerError, match=r"triggers\[0\]\.phase: aggregate_dir has no"):
        check_plan(plan)


# ---- two rank threads over one aggregate_dir ---------------------------------------------

RunRanks = Callable[..., tuple[WorkloadSpec, dict[int, str]]]


@pytest.fixture
def run_ranks(tmp_path: Path) -> RunRanks:
    """Run the workload's rank loop on two threads; returns the spec and each rank's error."""
    pytest.importorskip("zephon")

    def run(name: str, **fields: Any) -> tuple[WorkloadSpec, dict[int, str]]:
        out = tmp_path / name
        spec = WorkloadSpec(
            pipeline=PipelineSpec(
                canonical_replicas=2, aggregation="dir", aggregate_timeout_s=TIMEOUT_S
            ),
            steps=3,
            checkpoints=(CheckpointAt(1), CheckpointAt(2)),
            out_dir=str(out),
            aggregate_dir=str(out / "agg"),
            **fields,
        )
        errors = run_rank_threads(spec, 2, "torch://")
        return spec, errors

    return run


def test_every_file_phase_of_every_round_is_seen_in_protocol_order(run_ranks: RunRanks) -> None:
    spec, errors = run_ranks("observe", interpose=True)
    assert not errors
    leader = ["announce", "shard", "outcome"]
    follower = ["shard", "ack"]
    assert phases_written(spec.out_dir, 0) == [(p, n) for n in (1, 2) for p in leader]
    assert phases_written(spec.out_dir, 1) == [(p, n) for n in (1, 2) for p in follower]
    outcomes = [e["outcome"] for e in read_events(spec.out_dir, 0) if e["phase"] == "outcome"]
    assert outcomes == ["result", "result"]
    keys = [e["key"] for e in read_events(spec.out_dir, 1) if e["kind"] == "write"]
    assert all(Path(k).parent.name == ".zephon_agg" for k in keys), keys


def test_only_the_pipeline_given_a_plan_is_interposed(run_ranks: RunRanks) -> None:
    """Rank 1's trigger wraps rank 1's pipeline; rank 0, a thread of the same process, runs
    its rounds through Zephon's own backend and writes no event."""
    spec, errors = run_ranks("one", triggers=(PhaseTrigger(1, "ack", "event", occurrence=2),))
    assert not errors
    assert not events_path(spec.out_dir, 0).exists()
    fired = [e for e in read_events(spec.out_dir, 1) if e["kind"] == "fired"]
    assert [(e["phase"], e["n"], e["action"]) for e in fired] == [("ack", 2, "event")]


def test_a_raise_at_a_followers_shard_fails_the_round_naming_the_interposer(
    run_ranks: RunRanks,
) -> None:
    spec, errors = run_ranks("raise", triggers=(PhaseTrigger(1, "shard", "raise"),))
    assert "interposer: rank 1 fails its shard write #1" in errors[1]
    fired = [e for e in read_events(spec.out_dir, 1) if e["kind"] == "fired"]
    assert [(e["phase"], e["n"], e["action"]) for e in fired] == [("shard", 1, "raise")]
    verdict = fault_oracle.judge(
        read_phase(spec.out_dir, 2), None, index=0, canonical_replicas=2, timeout_s=TIMEOUT_S
    )
    assert verdict.outcome == fault_oracle.FAILED, verdict.describe()
    assert verdict.durations[0] <= fault_oracle.failure_bound_s(TIMEOUT_S)
    outcomes = [e["outcome"] for e in read_events(spec.out_dir, 0) if e.get("phase") == "outcome"]
    assert outcomes == [], "the leader was to time out, not publish"


def test_a_raise_at_the_leaders_outcome_publishes_the_failure_notice(
    run_ranks: RunRanks,
) -> None:
    """The leader's result write raises; Zephon then writes the failure file (outcome #2),
    which the follower reads as the leader's failure: the round fails on both."""
    spec, errors = run_ranks("outcome", triggers=(PhaseTrigger(0, "outcome", "raise"),))
    assert "interposer: rank 0 fails its outcome write #1" in errors[0]
    assert "failed on leader" in errors[1]
    written = [
        (e["n"], e["outcome"]) for e in read_events(spec.out_dir, 0) if e["kind"] == "write"
        and e["phase"] == "outcome"
    ]
    assert written == [(1, "result"), (2, "failure")]
    verdict = fault_oracle.judge(
        read_phase(spec.out_dir, 2), None, index=0, canonical_replicas=2, timeout_s=TIMEOUT_S
    )
    assert verdict.outcome == fault_oracle.FAILED, verdict.describe()


def test_a_dropped_ack_file_splits_the_round(run_ranks: RunRanks) -> None:
    """Rank 1 returns (its ack 'was written'), the leader times out waiting for it: split."""
    spec, errors = run_ranks("drop", triggers=(PhaseTrigger(1, "ack", "drop", occurrence=2),))
    assert_dropped_ack_splits(spec, errors)
