"""The heal oracle on records: the next call after a healed link fault must complete on every
rank, and where the promise does not apply the verdict says why instead of judging.

Records are built here, so every branch is reached on purpose; the in-process tier's fault
tests (``tests/unit/inproc/test_healed_link.py``) show the same verdicts on real rounds.
"""

from __future__ import annotations

from typing import Any

import pytest

from zephon_chaos.oracles import healing as oracle
from zephon_chaos.problem import Area, ProblemKind
from zephon_chaos.workload.records import (
    CHECKPOINT_BEGUN,
    LINK_HEALED_RECORD,
    CheckpointEvent,
    RankRecord,
)

C = 2
HEAL = {"kind": LINK_HEALED_RECORD, "index": 0, "attempt": 1, "phase": "shard", "n": 1}


def attempt(index: int, n: int, good: bool, digest: str = "d", error: str = "") -> dict[str, Any]:
    return {
        "kind": "checkpoint_attempt",
        "index": index,
        "attempt": n,
        "ok": good,
        "digest": digest if good else None,
        "error": None if good else error,
    }


def ok(index: int, digest: str = "d", lanes: int = C) -> CheckpointEvent:
    return CheckpointEvent(index, 4, True, digest=digest, lanes_covered=list(range(lanes)))


def failed(index: int, error: str = "RuntimeError: TCPStore set failed") -> CheckpointEvent:
    return CheckpointEvent(index, 4, False, error=error)


def rank(
    r: int, *checkpoints: CheckpointEvent, events: list[dict[str, Any]] | None = None
) -> RankRecord:
    return RankRecord(rank=r, checkpoints=list(checkpoints), events=list(events or []))


def lockstep(second: tuple[bool, bool], digests: tuple[str, str] = ("d", "d")) -> list[RankRecord]:
    """Two ranks, checkpoint 0 failed on attempt 1 (rank 1's link healed after it), then
    attempt 2 as ``second`` says."""
    out = []
    for r, good in enumerate(second):
        events = [attempt(0, 1, False, error="TCPStore"), attempt(0, 2, good, digests[r], "x")]
        if r == 1:
            events.insert(1, HEAL)
        final = ok(0, digests[r]) if good else failed(0, "x")
        out.append(rank(r, final, events=events))
    return out


def test_a_completed_retry_after_the_heal_is_recovery() -> None:
    verdict = oracle.judge(lockstep((True, True)), canonical_replicas=C, retry="lockstep")
    assert verdict.outcome is oracle.HealOutcome.RECOVERED and verdict.ok
    assert "checkpoint 0 attempt 2" in verdict.evidence[0]


@pytest.mark.parametrize(
    ("second", "digests", "words"),
    [
        ((True, False), ("d", "d"), "rank 1 failed"),
        ((False, False), ("d", "d"), "rank 0 failed"),
        ((True, True), ("d", "e"), "different checkpoints"),
    ],
)
def test_a_next_call_that_did_not_complete_everywhere_is_a_typed_problem(
    second: tuple[bool, bool], digests: tuple[str, str], words: str
) -> None:
    verdict = oracle.judge(lockstep(second, digests), canonical_replicas=C, retry="lockstep")
    assert verdict.outcome is oracle.HealOutcome.NOT_RECOVERED
    (problem,) = verdict.problems
    assert problem.is_(Area.FAULT, ProblemKind.NO_RECOVERY_AFTER_HEAL)
    assert problem.checkpoint == 0 and words in problem.text


def test_a_next_call_covering_too_few_lanes_is_no_recovery() -> None:
    records = lockstep((True, True))
    records[0].checkpoints = [ok(0, lanes=1)]
    verdict = oracle.judge(records, canonical_replicas=C, retry="lockstep")
    assert "covers lanes [0], not 2" in verdict.problems[0].text


def test_under_skip_the_next_call_is_the_next_checkpoint() -> None:
    records = [
        rank(r, failed(0), ok(1), events=[attempt(0, 1, False), attempt(1, 1, True)])
        for r in range(2)
    ]
    records[1].events.insert(1, HEAL)
    verdict = oracle.judge(records, canonical_replicas=C, retry="skip")
    assert verdict.ok and "checkpoint 1 attempt 1" in verdict.evidence[0]


def test_a_rank_that_never_recorded_the_next_call_is_no_recovery() -> None:
    """Rank 0 began checkpoint 1 and left no result of it (killed or stuck inside)."""
    records = [
        rank(0, ok(0), events=[{"kind": CHECKPOINT_BEGUN, "index": 1}]),
        rank(1, ok(0), ok(1), events=[HEAL]),
    ]
    verdict = oracle.judge(records, canonical_replicas=C, retry="none")
    assert "rank 0 recorded no result" in verdict.problems[0].text


@pytest.mark.parametrize(
    ("records", "retry", "late", "why"),
    [
        (lockstep((False, False)), "lockstep", True, oracle.Unjudged.LATE_RANK),
        (lockstep((False, False)), "independent", False, oracle.Unjudged.INDEPENDENT),
        (
            [rank(0, failed(0)), rank(1, failed(0), events=[HEAL])],
            "none",
            False,
            oracle.Unjudged.ENDED,
        ),
        (
            [rank(0, ok(0)), rank(1, ok(0), events=[HEAL])],
            "none",
            False,
            oracle.Unjudged.NO_NEXT_CALL,
        ),
    ],
)
def test_where_the_promise_does_not_apply_the_verdict_says_why_and_finds_nothing(
    records: list[RankRecord], retry: str, late: bool, why: oracle.Unjudged
) -> None:
    verdict = oracle.judge(records, canonical_replicas=C, retry=retry, late=late)
    assert verdict.outcome is oracle.HealOutcome.UNJUDGED and not verdict.problems
    assert why.value in verdict.evidence[0]


def unseen(*later: tuple[bool, bool]) -> list[RankRecord]:
    """Two ranks under lockstep; attempt 1 of checkpoint 0 failed on rank 0 only, and rank 1's
    link healed after it with no store operation of rank 1 failed before (its ack, a write
    awaiting no reply, returned over the gone link); then attempts 2, 3, ... as ``later``."""
    out = []
    for r in range(2):
        events = [attempt(0, 1, r == 1, error="timed out waiting for acknowledgements")]
        if r == 1:
            events.append({**HEAL, "phase": "ack", "failure_seen": False})
        events += [attempt(0, n, good[r], error="Broken pipe") for n, good in enumerate(later, 2)]
        final = ok(0) if later[-1][r] else failed(0, "x")
        out.append(rank(r, final, events=events))
    return out


def test_a_heal_no_failed_operation_preceded_passes_over_the_next_call_its_rank_failed() -> None:
    """The rank's client kept the connection the fault ended; its next call's first operation
    fails on it, not retried (``TorchKVStore``): the call after it is promised, and there is
    none here."""
    verdict = oracle.judge(unseen((False, False)), canonical_replicas=C, retry="lockstep")
    assert verdict.outcome is oracle.HealOutcome.UNJUDGED and not verdict.problems
    assert oracle.Unjudged.DEAD_CONNECTION.value in verdict.evidence[0]


@pytest.mark.parametrize(
    ("later", "outcome", "named"),
    [
        (((False, False), (True, True)), oracle.HealOutcome.RECOVERED, "attempt 3"),
        (((False, False), (False, False)), oracle.HealOutcome.NOT_RECOVERED, "attempt 3"),
        (((False, True),), oracle.HealOutcome.NOT_RECOVERED, "next call, checkpoint 0 attempt 2"),
        (((True, True),), oracle.HealOutcome.RECOVERED, "next call, checkpoint 0 attempt 2"),
    ],
    ids=["after-recovered", "after-failed", "next-ok-on-the-rank", "next-recovered"],
)
def test_after_a_heal_no_failed_operation_preceded_the_promised_call_is_judged(
    later: tuple[tuple[bool, bool], ...], outcome: oracle.HealOutcome, named: str
) -> None:
    """The call after the next where the rank failed the next; the next one where it did not."""
    verdict = oracle.judge(unseen(*later), canonical_replicas=C, retry="lockstep")
    assert verdict.outcome is outcome
    text = verdict.problems[0].text if verdict.problems else verdict.evidence[0]
    assert named in text


def test_a_heal_record_without_failure_seen_is_judged_by_the_next_call() -> None:
    """Records written before the field existed keep their verdicts."""
    (heal,) = oracle.heals_of(lockstep((True, True)))
    assert heal.failure_seen


def test_a_launch_with_no_heal_is_not_judged() -> None:
    records = [rank(r, failed(0)) for r in range(2)]
    verdict = oracle.judge(records, canonical_replicas=C, retry="lockstep")
    assert verdict.outcome is oracle.HealOutcome.UNJUDGED and not verdict.evidence
