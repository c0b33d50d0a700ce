"""``dead-store-ack-cleanup`` explains a slow leader only where the store was killed in that
launch (its trigger), not where the kill was scheduled and never done."""

from __future__ import annotations

from tests.unit.explore.test_known import _killed_at
from zephon_chaos.explore.known import DEAD_STORE_ACK_CLEANUP
from zephon_chaos.problem import Area, Problem, ProblemKind

SLOW_LEADER = Problem(
    Area.FAULT,
    ProblemKind.SLOW_FAILURE,
    "rank 0 took 9.8s to fail one attempt, over the bound 9.0s",
    phase=0,
    checkpoint=0,
    rank=0,
)


def test_a_slow_leader_after_a_kill_that_never_happened_is_not_the_dead_store_defect() -> None:
    """The kill at ack#1 was scheduled, and the launch ended before the point: no store died,
    so the leader's slow failure is not the dead-store clean-up's."""
    outcome = _killed_at("ack#1", 4, 9.8)
    assert DEAD_STORE_ACK_CLEANUP.explains(outcome, SLOW_LEADER)  # type: ignore[arg-type]
    outcome.phases[0].fault.acted = []  # type: ignore[attr-defined]
    assert not DEAD_STORE_ACK_CLEANUP.explains(outcome, SLOW_LEADER)  # type: ignore[arg-type]
