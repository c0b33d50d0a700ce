"""``healed-link-poisons-retry`` explains a next call refused after a heal only where a link
fault healed in that launch after a call that failed (its trigger): the same refusal with no
heal, or after a faulted round that completed, is not it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from zephon_chaos.explore.known import (
    HEALED_LINK_POISONS_RETRY,
    MISMATCH,
    MISSED_ROUND_POISONS_NEXT,
)
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.workload.records import LINK_HEALED_RECORD, CheckpointEvent, RankRecord

REFUSED = f"RuntimeError: cannot merge 2 aggregation state shards:\n  - {MISMATCH}: {{None, '1'}}"
LINE = Problem(
    Area.FAULT, ProblemKind.NO_RECOVERY_AFTER_HEAL, "no recovery", phase=0, checkpoint=0, rank=0
)
HEAL = {"kind": LINK_HEALED_RECORD, "index": 0, "attempt": 1, "phase": "announce", "n": 1}


def attempt(n: int, error: str | None) -> dict[str, Any]:
    return {
        "kind": "checkpoint_attempt",
        "index": 0,
        "attempt": n,
        "ok": error is None,
        "digest": "d" if error is None else None,
        "error": error,
    }


def outcome(healed: bool, first: str | None, second: str) -> object:
    """Two ranks' lockstep attempts of checkpoint 0: ``first`` fails them (None: completes),
    then ``second`` refuses the retry; rank 0's link healed after attempt 1 if ``healed``."""
    records = []
    for r in range(2):
        events = [attempt(1, first), attempt(2, second)]
        if healed and r == 0:
            events.insert(1, HEAL)
        records.append(RankRecord(rank=r, events=events))
    return SimpleNamespace(phases=[SimpleNamespace(index=0, records=records)])


@pytest.mark.parametrize(
    ("healed", "first", "second", "explained"),
    [
        (True, "RuntimeError: TCPStore set failed: Broken pipe", REFUSED, True),
        (False, "RuntimeError: TCPStore set failed: Broken pipe", REFUSED, False),  # no heal
        (True, None, REFUSED, False),  # the faulted round completed: nothing was missed
        (True, "RuntimeError: TCPStore set failed", "RuntimeError: Timed out", False),
    ],
    ids=["healed-then-refused", "no-heal", "round-completed", "another-error"],
)
def test_the_healed_link_defect_needs_its_heal_and_its_refusal(
    healed: bool, first: str | None, second: str, explained: bool
) -> None:
    found = outcome(healed, first, second)
    assert HEALED_LINK_POISONS_RETRY.explains(found, LINE) is explained  # type: ignore[arg-type]


def test_the_healed_link_defect_explains_the_call_the_heal_oracle_judged() -> None:
    """A follower's link cut at its ack and healed with no failed operation before: its next
    call fails on the dead connection (a round it never joined), the one after is refused."""
    from zephon_chaos.oracles.healing import judge

    timed_out = "RuntimeError: Timed out waiting for checkpoint acknowledgements"
    records = []
    for r, first in enumerate((timed_out, None)):
        events = [attempt(1, first), attempt(2, "RuntimeError: Broken pipe"), attempt(3, REFUSED)]
        if r == 1:
            events.insert(1, {**HEAL, "phase": "ack", "failure_seen": False})
        records.append(RankRecord(rank=r, events=events))
    (problem,) = judge(records, canonical_replicas=2, retry="lockstep").problems
    assert "checkpoint 0 attempt 3" in problem.text
    found = SimpleNamespace(phases=[SimpleNamespace(index=0, records=records)])
    assert HEALED_LINK_POISONS_RETRY.explains(found, problem.in_phase(0))  # type: ignore[arg-type]


def test_the_healed_link_defect_explains_only_the_heal_oracles_problem() -> None:
    found = outcome(True, "RuntimeError: TCPStore set failed", REFUSED)
    other = Problem(Area.FAULT, ProblemKind.NO_CAUSE, "no cause", phase=0, checkpoint=0, rank=0)
    assert not HEALED_LINK_POISONS_RETRY.explains(found, other)  # type: ignore[arg-type]


def met_on_time(second: str) -> object:
    """Under independent retry beside a lag: the leader's first call timed out (its peer late),
    and its retry, met on time by the peer's first call, ended with ``second``."""
    timed_out = "RuntimeError: Timed out after 2.0s waiting for checkpoint shards"
    leader = RankRecord(
        rank=0,
        events=[attempt(1, timed_out), attempt(2, second)],
        checkpoints=[CheckpointEvent(0, after_batches=2, ok=False, error=second)],
    )
    late = RankRecord(rank=1, events=[attempt(1, second)])
    run = SimpleNamespace(index=0, records=[leader, late], policy=None)
    return SimpleNamespace(phases=[run])


@pytest.mark.parametrize(
    ("second", "explained"),
    [(REFUSED, True), ("RuntimeError: Timed out waiting for round id", False)],
    ids=["refused", "another-error"],
)
def test_an_on_time_meeting_with_a_retry_refused_for_its_round_id_is_the_missed_round(
    second: str, explained: bool
) -> None:
    found = met_on_time(second)
    met = Problem(Area.POLICY, ProblemKind.ON_TIME_FAILURE, "met on time", phase=0, checkpoint=0)
    assert MISSED_ROUND_POISONS_NEXT.explains(found, met) is explained  # type: ignore[arg-type]
