"""A relaunch's meeting of a dead launch's round is read from every error the launch recorded,
each attempt's included: under a retry a checkpoint keeps only its last attempt's error, while
the dead round's notice is met by the first; and only where that very round is named (the
trigger), in a launch that met it and did not clear it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from zephon_chaos.explore.known import DEAD_ROUND_MEETS_RELAUNCH, FAILED_ROUND_OPEN_IN_DIR
from zephon_chaos.explore.known.defect import KnownDefect
from zephon_chaos.faults.leftover_round import LeftoverRound
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.workload.records import CheckpointEvent, RankRecord

DEAD = "1796476068263634432"
"""The round the dead launch left announced in the relaunch's namespace."""
OWN = "1796476072565366784"
"""The relaunch's own round of its retry."""
REFUSED = (
    "RuntimeError: cannot merge 2 aggregation state shards:\n"
    f"  - last_round_id mismatch across shards: {{'1796476070562267392', '{DEAD}'}}"
)
NOTICE = f"RuntimeError: Checkpoint round {DEAD} failed on leader: RuntimeError: Timed out"
WAITED = f"RuntimeError: Timed out after 2.0s waiting for the outcome of round {DEAD}"
LINES = (
    Problem(
        Area.FAULT, ProblemKind.NO_EVIDENCE, "rank fault raise at ack left no evidence", 1, 0, 1
    ),
    Problem(
        Area.FAULT, ProblemKind.NO_CAUSE, "rank 0 failed with an error that names none", 1, 0, 0
    ),
)


def attempt(n: int, error: str) -> dict[str, Any]:
    return {"kind": "checkpoint_attempt", "index": 0, "attempt": n, "ok": False, "error": error}


def relaunch(first: str, *, failed: bool = True, met: str = DEAD, cleared: bool = False) -> object:
    """Launch 1, a relaunch that met round ``met``: rank 1's first lockstep attempt of checkpoint
    0 fails with ``first``, its retry (the checkpoint's error, and the rank's) with the merge's
    refusal of its own round."""
    last = f"RuntimeError: Checkpoint round {OWN} failed on leader: {REFUSED}"
    records = [
        RankRecord(
            rank=0,
            checkpoints=[CheckpointEvent(0, 4, False, error=REFUSED)],
            events=[attempt(1, "RuntimeError: Timed out"), attempt(2, REFUSED)],
        ),
        RankRecord(
            rank=1,
            checkpoints=[CheckpointEvent(0, 4, False, error=last)],
            events=[
                attempt(1, first),
                attempt(2, last),
                {"kind": "error", "error": f"RuntimeError: checkpoint 0 failed: {last}"},
            ],
        ),
    ]
    run = SimpleNamespace(
        index=1,
        records=records,
        met_round=LeftoverRound("zc-run-0/.zephon_agg", met, failed),
        cleared_round=cleared,
    )
    return SimpleNamespace(phases=[run])


@pytest.mark.parametrize(
    ("defect", "found", "explained"),
    [
        (FAILED_ROUND_OPEN_IN_DIR, relaunch(NOTICE), True),
        (FAILED_ROUND_OPEN_IN_DIR, relaunch(NOTICE, met="1"), False),  # another round named
        (FAILED_ROUND_OPEN_IN_DIR, relaunch(NOTICE, cleared=True), False),  # operator cleared it
        (FAILED_ROUND_OPEN_IN_DIR, relaunch(NOTICE, failed=False), False),  # no notice was left
        (FAILED_ROUND_OPEN_IN_DIR, relaunch("RuntimeError: Timed out"), False),  # none joined it
        (DEAD_ROUND_MEETS_RELAUNCH, relaunch(WAITED, failed=False), True),
        (DEAD_ROUND_MEETS_RELAUNCH, relaunch(WAITED), False),  # the failed round's defect
    ],
    ids=[
        "notice-in-first-attempt",
        "other-round",
        "cleared",
        "dead-not-failed",
        "not-joined",
        "dead-round-first-attempt",
        "failed-round-is-not-dead",
    ],
)
def test_the_met_round_is_read_from_each_attempt(
    defect: KnownDefect, found: object, explained: bool
) -> None:
    for line in LINES:
        assert defect.explains(found, line) is explained, line  # type: ignore[arg-type]
