"""The policy oracle on synthetic records: each round judged by when each rank's call began."""

from __future__ import annotations

import pytest

from zephon_chaos.oracles.checkpoints import gather
from zephon_chaos.oracles.policies import (
    LATE_SLACK_S,
    PolicyProblemKind,
    RoundOutcome,
    judge,
)
from zephon_chaos.runner import surviving_checkpoint
from zephon_chaos.workload.records import CheckpointEvent, RankRecord

T = 2.0


def rank(r: int, *rounds: tuple[int, float, bool], ended: bool = True) -> RankRecord:
    """A rank's records: (index, start, ok) of each checkpoint, one call each."""
    return RankRecord(
        rank=r,
        world_size=2,
        checkpoints=[
            CheckpointEvent(i, after_batches=i, ok=ok, started_at=at, ended_at=at + 0.1, digest="d")
            for i, at, ok in rounds
        ],
        ended=ended,
    )


def kinds(verdict) -> list[PolicyProblemKind]:
    return [p.kind for p in verdict.problems]


def test_a_round_whose_ranks_began_further_apart_than_the_budget_failed_by_design() -> None:
    records = [
        rank(0, (0, 10.0, True), (1, 20.0, False)),
        rank(1, (0, 10.0, True), (1, 22.1, False)),
    ]
    verdict = judge(records, phase=0, timeout_s=T)
    assert [r.outcome for r in verdict.rounds] == [RoundOutcome.COMPLETED, RoundOutcome.LATE]
    assert verdict.ok and verdict.failed_by_arrival
    assert verdict.rounds[1].spread_s == pytest.approx(2.1)


def test_a_round_that_failed_with_every_rank_on_time_and_no_fault_is_a_finding() -> None:
    records = [rank(0, (0, 10.0, False)), rank(1, (0, 10.3, False))]
    verdict = judge(records, phase=1, timeout_s=T)
    assert [r.outcome for r in verdict.rounds] == [RoundOutcome.ON_TIME_FAILURE]
    assert kinds(verdict) == [PolicyProblemKind.ON_TIME_FAILURE]
    assert not verdict.failed_by_arrival
    assert "phase 1: checkpoint 0" in verdict.lines()[0]


def test_an_on_time_failure_under_a_scheduled_fault_is_the_fault_oracles_to_judge() -> None:
    records = [rank(0, (0, 10.0, False)), rank(1, (0, 10.3, False))]
    verdict = judge(records, phase=0, timeout_s=T, faulted=True)
    assert [r.outcome for r in verdict.rounds] == [RoundOutcome.FAULTED] and verdict.ok


@pytest.mark.parametrize(
    ("apart", "outcome"),
    [
        (T - LATE_SLACK_S / 2, RoundOutcome.LATE),
        (T - LATE_SLACK_S * 2, RoundOutcome.ON_TIME_FAILURE),
    ],
    ids=["within-the-slack", "well-within-the-budget"],
)
def test_lateness_is_measured_against_the_budget_less_the_rounds_own_work(
    apart: float, outcome: RoundOutcome
) -> None:
    records = [rank(0, (0, 10.0, False)), rank(1, (0, 10.0 + apart, False))]
    assert judge(records, phase=0, timeout_s=T).rounds[0].outcome is outcome


def test_a_rank_that_never_called_is_absent_not_a_finding() -> None:
    records = [rank(0, (0, 10.0, True), (1, 20.0, False)), rank(1, (0, 10.0, True), ended=False)]
    verdict = judge(records, phase=0, timeout_s=T)
    assert verdict.rounds[1].outcome is RoundOutcome.ABSENT
    assert verdict.ok and verdict.failed_by_arrival


def test_the_first_attempt_is_the_round_judged_under_a_retry() -> None:
    """A lockstep retry's second attempt succeeded: the first, late, is still on record."""
    rec0, rec1 = rank(0, (0, 20.0, True)), rank(1, (0, 22.5, True))
    rec0.events.append(
        {"kind": "checkpoint_attempt", "index": 0, "attempt": 1, "ok": False, "started_at": 20.0}
    )
    rec1.events.append(
        {"kind": "checkpoint_attempt", "index": 0, "attempt": 1, "ok": False, "started_at": 22.5}
    )
    verdict = judge([rec0, rec1], phase=0, timeout_s=T, retry="lockstep")
    assert verdict.rounds[0].outcome is RoundOutcome.LATE and verdict.rounds[0].agreed


def skipped() -> list[RankRecord]:
    """Under skip: checkpoint 1 failed on both ranks (late), 0 and 2 completed."""
    return [
        rank(0, (0, 10.0, True), (1, 20.0, False), (2, 30.0, True)),
        rank(1, (0, 10.0, True), (1, 22.5, False), (2, 30.0, True)),
    ]


def test_under_skip_every_checkpoint_every_rank_got_is_on_disk_and_no_other() -> None:
    verdict = judge(skipped(), phase=0, timeout_s=T, retry="skip", persisted=lambda i: i != 1)
    assert verdict.ok, verdict.lines()
    assert [r.agreed for r in verdict.rounds] == [True, False, True]


def test_under_skip_a_persisted_failed_checkpoint_and_a_missing_good_one_are_problems() -> None:
    verdict = judge(skipped(), phase=0, timeout_s=T, retry="skip", persisted=lambda i: i == 1)
    assert kinds(verdict) == [
        PolicyProblemKind.MISSING_FILE,
        PolicyProblemKind.PERSISTED_FAILED,
        PolicyProblemKind.MISSING_FILE,
    ]


def test_under_skip_a_rank_that_missed_a_checkpoint_breaks_the_alignment() -> None:
    records = skipped()
    records[1].checkpoints.pop(1)
    verdict = judge(records, phase=0, timeout_s=T, retry="skip")
    assert [(p.kind, p.checkpoint) for p in verdict.problems] == [(PolicyProblemKind.MISALIGNED, 1)]


def test_the_checkpoint_resumed_after_a_skipped_one_is_the_next_good_one() -> None:
    facts = gather(skipped())
    assert surviving_checkpoint(facts) == 2
    assert surviving_checkpoint(facts[:2]) == 0


ON_TIME = PolicyProblemKind.ON_TIME_FAILURE


def attempts(r: int, *calls: tuple[int, int, float, float, bool]) -> RankRecord:
    """A free-running rank's calls: (index, attempt, start, end, ok) of each."""
    events = [
        {
            "kind": "checkpoint_attempt",
            "index": i,
            "attempt": n,
            "started_at": at,
            "ended_at": end,
            "ok": ok,
        }
        for i, n, at, end, ok in calls
    ]
    return RankRecord(rank=r, world_size=2, events=events)


def late_peer_meets_the_retry(retry_ok: bool) -> list[RankRecord]:
    """Under independent retry beside a lag (a replayed launch's times): rank 1 is late for
    the leader's first call, so its first call meets the leader's retry at once; its own
    retry begins after the leader has drawn on."""
    return [
        attempts(0, (0, 1, 10.0, 12.005, False), (0, 2, 12.010, 12.046, retry_ok)),
        attempts(1, (0, 1, 12.007, 12.046, retry_ok), (0, 2, 12.047, 14.05, False)),
    ]


def test_an_independent_retry_a_late_peer_met_on_time_and_failed_is_a_finding() -> None:
    verdict = judge(late_peer_meets_the_retry(False), phase=0, timeout_s=T, retry="independent")
    assert verdict.rounds[0].outcome is RoundOutcome.LATE  # the first round, by design
    assert kinds(verdict) == [PolicyProblemKind.ON_TIME_FAILURE]
    assert verdict.problems[0].checkpoint == 0
    assert "rank 0's attempt 2 of checkpoint 0, rank 1's attempt 1" in verdict.problems[0].detail


@pytest.mark.parametrize(
    ("retry_ok", "retry", "faulted"),
    [(True, "independent", False), (False, "independent", True), (False, "lockstep", False)],
    ids=["met-and-completed", "faulted", "agreeing-retry"],
)
def test_a_meeting_is_judged_only_where_it_failed_unfaulted_under_independent_retry(
    retry_ok: bool, retry: str, faulted: bool
) -> None:
    records = late_peer_meets_the_retry(retry_ok)
    verdict = judge(records, phase=0, timeout_s=T, retry=retry, faulted=faulted)
    assert ON_TIME not in kinds(verdict)


def test_a_call_begun_while_its_peer_had_another_round_open_met_no_retry() -> None:
    """Rank 1 began while the leader's first round was still open: it may have joined that
    one, so its call is no meeting with the retry."""
    records = [
        attempts(0, (0, 1, 10.0, 12.005, False), (0, 2, 12.010, 12.046, False)),
        attempts(1, (0, 1, 11.9, 12.046, False)),
    ]
    verdict = judge(records, phase=0, timeout_s=T, retry="independent")
    assert ON_TIME not in kinds(verdict)


def test_a_retry_begun_while_the_round_its_rank_had_joined_was_open_met_the_next() -> None:
    """A replayed launch's times (G 4, T = 2 s, rank 3 lagging): rank 2's first call joined
    the leader's first round and timed out 16 ms before the leader's did; its retry, begun
    while that round was still open, cannot rejoin it (Zephon skips an announced round its
    own shard is in), so it met the leader's retry with ranks 1 and 3, on time, and failed."""
    refused = "cannot merge 4 aggregation state shards: last_round_id mismatch across shards"
    records = [
        attempts(0, (0, 1, 5.183, 7.185, False), (0, 2, 7.186, 7.384, False)),
        attempts(1, (0, 1, 5.191, 7.188, False), (0, 2, 7.1888, 7.383, False)),
        attempts(2, (0, 1, 5.161, 7.169, False), (0, 2, 7.1696, 7.382, False)),
        attempts(3, (0, 1, 7.1889, 7.381, False), (0, 2, 7.381, 9.391, False)),
    ]
    for rec in records:
        rec.events[-1 if rec.rank < 3 else 0]["error"] = refused
    records[3].events[1]["error"] = "Timed out after 2.0s waiting for round id at zephon/round"
    verdict = judge(records, phase=0, timeout_s=T, retry="independent")
    assert kinds(verdict) == [ON_TIME]
    assert "rank 2's attempt 2 of checkpoint 0, rank 3's attempt 1" in verdict.problems[0].detail


def test_a_retry_whose_rank_joined_no_round_may_join_the_one_still_open() -> None:
    """Rank 1's first call timed out waiting for a round id (it joined none), so its retry,
    begun while the leader's first round was open, may have joined that one: no meeting."""
    records = [
        attempts(0, (0, 1, 10.0, 12.005, False), (0, 2, 12.010, 12.046, False)),
        attempts(1, (0, 1, 8.4, 10.4, False), (0, 2, 11.0, 12.046, False)),
    ]
    records[1].events[0]["error"] = "Timed out after 2.0s waiting for round id at zephon/round"
    verdict = judge(records, phase=0, timeout_s=T, retry="independent")
    assert ON_TIME not in kinds(verdict)


def lone_retry_takes_the_next_round(retry_ends_at: float) -> list[RankRecord]:
    """A replayed launch's times (seed 241, G 2, T = 2 s, rank 1 late for checkpoint 0,
    checkpoints 0 and 1 at one step, independent retry): rank 1's retry of checkpoint 0
    begins 1 ms before the leader's retry ends (a round rank 1's first call was already in)
    and overlaps the leader's first call of checkpoint 1."""
    records = [
        attempts(
            0,
            (0, 1, 36683.555, 36685.556, False),
            (0, 2, 36685.557, 36685.577, False),
            (1, 1, 36685.578, 36685.780, True),
        ),
        attempts(
            1,
            (0, 1, 36685.559, 36685.576, False),
            (0, 2, 36685.576, retry_ends_at, True),
            (1, 1, 36685.611, 36687.650, False),
        ),
    ]
    records[1].events[2]["error"] = "Timed out after 2.0s waiting for round id at zephon/round"
    return records


def test_a_checkpoint_whose_round_a_lone_retry_took_is_no_on_time_failure() -> None:
    """Rank 1's retry of checkpoint 0 joined the leader's round of checkpoint 1 (the newest
    open), so its own call of checkpoint 1 met none: the ranks' checkpoints are misaligned,
    as docs/faults.md says a late call may be, and what they got is judged by resuming it."""
    verdict = judge(
        lone_retry_takes_the_next_round(36685.597), phase=0, timeout_s=T, retry="independent"
    )
    assert [r.outcome for r in verdict.rounds] == [RoundOutcome.LATE, RoundOutcome.TAKEN]
    assert all(p.checkpoint != 1 for p in verdict.problems), verdict.problems


def test_a_retry_that_ended_before_the_leaders_next_call_took_no_round() -> None:
    """The same launch with rank 1's retry over before the leader's checkpoint 1 began: its
    call of checkpoint 1 met the leader's on time and failed, a finding."""
    verdict = judge(
        lone_retry_takes_the_next_round(36685.5775), phase=0, timeout_s=T, retry="independent"
    )
    assert verdict.rounds[1].outcome is RoundOutcome.ON_TIME_FAILURE
