"""The fault oracle on records: each acceptable outcome, and each way to be a finding.

Records are built here, so every branch is reached on purpose; the suite's fault tests show
the same verdicts on real groups.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.oracles import faults as oracle
from zephon_chaos.oracles.global_batches import PhaseRecords
from zephon_chaos.workload import persist
from zephon_chaos.workload.records import Batch, CheckpointEvent, RankRecord

T = 2.0


def ok(index: int = 1, digest: str = "d1", lanes: int = 2) -> CheckpointEvent:
    return CheckpointEvent(index, 4, True, digest=digest, lanes_covered=list(range(lanes)))


def failed(error: str, duration_s: float = 2.0, index: int = 1) -> CheckpointEvent:
    return CheckpointEvent(index, 4, False, error=error, duration_s=duration_s)


def attempt(n: int, good: bool, seconds: float = 0.1, index: int = 1) -> dict[str, Any]:
    return {
        "kind": "checkpoint_attempt",
        "index": index,
        "attempt": n,
        "ok": good,
        "started_at": 10.0,
        "ended_at": 10.0 + seconds,
    }


def rank(
    r: int, *checkpoints: CheckpointEvent, events: list[dict[str, Any]] | None = None
) -> RankRecord:
    return RankRecord(rank=r, checkpoints=list(checkpoints), events=events or [])


def group(*codes: int | None, timed_out: bool = False) -> GroupResult:
    return GroupResult(
        name="g",
        agent_returncodes=[1 if any(codes) else 0],
        ranks=[
            RankOutcome(r, r, 0, 100 + r, code, killed_by_harness=False, kernel_note="n/a")
            for r, code in enumerate(codes)
        ],
        timed_out=timed_out,
        duration_s=30.0,
        workdir=Path("."),
        agent_logs=[],
    )


def judge(records: list[RankRecord], result: GroupResult | None = None, **kw: Any):
    return oracle.judge(records, result, index=1, canonical_replicas=2, timeout_s=T, **kw)


def test_an_outcome_is_a_value_told_by_its_name() -> None:
    names = ["completed", "failed", "split", "split_resolved", "finding"]
    assert [o.value for o in oracle.FaultOutcome] == names
    assert (oracle.COMPLETED, oracle.FAILED, oracle.FINDING) == ("completed", "failed", "finding")
    verdict = judge([rank(0, failed("Timed out")), rank(1, failed("TCPStore"))], group(1, 1))
    assert verdict.outcome is oracle.FaultOutcome.FAILED and verdict.ok
    assert verdict.describe().startswith("checkpoint 1: failed\n")


def test_every_rank_returning_the_same_checkpoint_is_completed() -> None:
    verdict = judge([rank(0, ok()), rank(1, ok())], expected_position="p", position="p")
    assert verdict.outcome == oracle.COMPLETED, verdict.describe()


@pytest.mark.parametrize(
    ("records", "kw", "problem"),
    [
        ([rank(0, ok(digest="a")), rank(1, ok(digest="b"))], {}, "different checkpoints"),
        ([rank(0, ok(lanes=1)), rank(1, ok(lanes=1))], {}, "covers lanes"),
        (
            [rank(0, ok()), rank(1, ok())],
            {"expected_position": "p", "position": "q"},
            "another position",
        ),
    ],
)
def test_a_completed_round_that_differs_is_a_finding(
    records: list[RankRecord], kw: dict[str, Any], problem: str
) -> None:
    verdict = judge(records, **kw)
    assert verdict.outcome == oracle.FINDING and problem in verdict.describe()


def test_every_rank_failing_with_its_cause_within_the_bound_is_failed() -> None:
    records = [
        rank(0, failed("RuntimeError: Timed out after 2.0s waiting for checkpoint shards")),
        rank(1, failed("RuntimeError: TCPStore set of 'k' at 127.0.0.1:1 failed: reset")),
    ]
    verdict = judge(records, causes={0: "checkpoint shards", 1: "TCPStore set"})
    assert verdict.outcome == oracle.FAILED, verdict.describe()


@pytest.mark.parametrize(
    ("error", "seconds", "problem"),
    [
        ("RuntimeError: boom", 1.0, "names none of"),
        ("RuntimeError: Timed out after 2.0s", oracle.failure_bound_s(T) + 1, "over the bound"),
    ],
)
def test_a_failure_without_its_cause_or_past_the_bound_is_a_finding(
    error: str, seconds: float, problem: str
) -> None:
    records = [rank(0, failed(error, seconds)), rank(1, failed("Timed out", 1.0))]
    verdict = judge(records)
    assert verdict.outcome == oracle.FINDING and problem in verdict.describe()


def test_time_a_rank_spent_stopped_is_excused() -> None:
    slow = oracle.failure_bound_s(T) + 5
    records = [rank(0, failed("Timed out", 2.0)), rank(1, failed("failed on leader", slow))]
    assert judge(records).outcome == oracle.FINDING
    assert judge(records, excused_s={1: slow - 0.5}).outcome == oracle.FAILED


def test_time_a_link_held_data_back_within_the_attempt_is_excused() -> None:
    slow = oracle.failure_bound_s(T) + 3
    late = [attempt(0, False, seconds=slow)]  # from 10.0 to 10.0 + slow
    records = [
        rank(0, failed("Timed out", slow), events=late),
        rank(1, failed("failed on leader", 1.0)),
    ]
    assert judge(records).outcome == oracle.FINDING
    # Delays inside the attempt are the network's; one before it, or a stall, excuses nothing.
    inside = [(10.5, 12.0), (12.0, 14.0), (13.5, 15.0)]  # 4.5 s covered (two overlap)
    verdict = judge(records, held={0: inside})
    assert verdict.outcome == oracle.FAILED, verdict.describe()
    assert verdict.durations[0] == pytest.approx(slow - 4.5)
    assert "held its data back 4.5s" in verdict.describe()
    outside = [(0.0, 9.9), (10.0 + slow, 40.0)]
    assert judge(records, held={0: outside}).outcome == oracle.FINDING


def test_overlap_counts_each_covered_second_once() -> None:
    assert oracle.overlap_s([(0, 2), (1, 3), (5, 6)], 0.5, 5.5) == pytest.approx(3.0)
    assert oracle.overlap_s([], 0, 1) == 0.0


def test_some_ranks_returning_while_others_fail_is_a_split() -> None:
    records = [rank(0, failed("Timed out ... acknowledgements")), rank(1, ok())]
    verdict = judge(records)
    assert verdict.outcome == oracle.SPLIT and "split: ranks [1] returned" in verdict.describe()


def test_a_split_attempt_then_agreement_is_resolved() -> None:
    records = [
        rank(0, ok(), events=[attempt(1, False, 2.0), attempt(2, True)]),
        rank(1, ok(), events=[attempt(1, True), attempt(2, True)]),
    ]
    verdict = judge(records)
    assert verdict.outcome == oracle.SPLIT_RESOLVED, verdict.describe()
    assert "attempt 1 split: ranks [1] returned, ranks [0] failed" in verdict.evidence


def test_a_group_past_its_deadline_is_a_hang() -> None:
    verdict = judge([rank(0), rank(1)], group(-9, -9, timed_out=True))
    assert verdict.outcome == oracle.FINDING and "hang" in verdict.problems[0].text


def test_a_rank_ended_by_torchrun_after_a_peer_failed_is_evidence_not_a_finding() -> None:
    records = [rank(0, failed("TCPStore check failed")), rank(1)]
    verdict = judge(records, group(1, -signal.SIGTERM))
    assert verdict.outcome == oracle.FAILED, verdict.describe()
    assert "killed by SIGTERM" in verdict.describe()


def test_a_rank_that_exits_0_without_its_checkpoint_is_a_finding() -> None:
    verdict = judge([rank(0, failed("Timed out")), rank(1)], group(1, 0))
    assert verdict.outcome == oracle.FINDING and "left no record" in verdict.describe()


def test_a_rank_whose_exit_status_is_unknown_is_evidence_not_a_finding() -> None:
    """Its agent omitted it: no evidence that it ended well, so no finding either."""
    result = group(1, None)
    result.ranks[1].unknown_because = "its agent's failure summary omits it"
    verdict = judge([rank(0, failed("Timed out")), rank(1)], result)
    assert verdict.outcome == oracle.FAILED, verdict.describe()
    assert "exit status unknown (its agent's failure summary omits it)" in verdict.describe()


def test_a_rank_the_fault_killed_shows_it_in_its_wait_status() -> None:
    records = [rank(0, failed("Timed out waiting for checkpoint shards")), rank(1)]
    killed = judge(records, group(1, -signal.SIGKILL), faulted={1: "killed by SIGKILL"})
    assert killed.outcome == oracle.FAILED, killed.describe()
    other = judge(records, group(1, -signal.SIGTERM), faulted={1: "killed by SIGKILL"})
    assert other.outcome == oracle.FINDING


def test_a_rank_that_failed_before_its_first_checkpoint_names_its_error() -> None:
    unreachable = {"kind": "error", "error": "RuntimeError: Can't reach the checkpoint TCPStore"}
    records = [
        rank(0, failed("Timed out", 2.0)),
        RankRecord(rank=1, events=[{**unreachable, "since_start_s": 4.0}]),
    ]
    verdict = judge(records, group(1, 1), causes={1: "Can't reach"})
    assert verdict.outcome == oracle.FAILED, verdict.describe()


def test_the_previous_checkpoint_must_be_on_disk_as_recorded(tmp_path: Path) -> None:
    ckpt = {"progress": {0: 1}, "world": {"world_size": 2}}
    path = tmp_path / "ckpt-0.pkl"
    persist.save(ckpt, path, "pickle")
    records = [rank(r, ok(0, persist.digest(ckpt))) for r in (0, 1)]
    assert oracle.previous_intact(records, path, 0, "pickle") == []
    persist.save({**ckpt, "progress": {0: 2}}, path, "pickle")
    assert "changed after the fault" in oracle.previous_intact(records, path, 0, "pickle")[0]
    path.unlink()
    assert "does not exist" in oracle.previous_intact(records, path, 0, "pickle")[0]


def test_positions_ignore_prefetch_state_and_round_ids() -> None:
    base = {"progress": {0: 3}, "lane_emitted": {0: 3}, "world": {"world_size": 2}}
    a = {**base, "inflight": {0: [4, 5]}, "last_round_id": "1"}
    b = {**base, "inflight": {0: [4]}, "last_round_id": "2"}
    assert oracle.position_digest(a) == oracle.position_digest(b)
    assert oracle.position_digest(a) != oracle.position_digest({**a, "progress": {0: 4}})


def test_launches_stitched_at_their_restore_match_an_uninterrupted_run() -> None:
    def batches(lane: int, steps: range, ckpts: int = 0) -> list[Batch]:
        return [Batch(s, lane, [(0, lane, s)], ckpts) for s in steps]

    reference = [
        RankRecord(0, batches=batches(0, range(4))),
        RankRecord(1, batches=batches(1, range(4))),
    ]
    first = [
        RankRecord(r, batches=batches(r, range(1)) + batches(r, range(1, 3), 1)) for r in (0, 1)
    ]
    again = [RankRecord(r, batches=batches(r, range(1, 4))) for r in (0, 1)]
    parts = [PhaseRecords(2, first, 1), PhaseRecords(2, again, None)]
    assert oracle.stitched_identity(reference, parts, 4).ok
    skipped = [RankRecord(r, batches=batches(r, range(2, 5))) for r in (0, 1)]
    verdict = oracle.stitched_identity(
        reference, [PhaseRecords(2, first, 1), PhaseRecords(2, skipped, None)], 4
    )
    assert not verdict.ok and verdict.first_divergence is not None
