"""``dead-store-ack-cleanup``: the leader's clean-up after a store died at the
acknowledgements costs one connection timeout per acknowledgement it read."""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect, over_bound, run_of
from zephon_chaos.problem import Problem
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario_rules import FOLLOWER_POINTS

LEADER = 0
"""Zephon's round leader: global rank 0, worker 0 (``Engine.state_dict``, engine.py 1874)."""
DEAD_STORE_DELETE_TIMEOUTS = 4.0
"""One store call of the leader's clean-up against a dead store, in ``T``: a new client whose
connect c10d retries within ``T`` (1.0-3.2 T measured by ``dead_store_ack_cleanup.py``)."""


def _dead_store_ack_cleanup(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """The leader's call over its bound in a launch whose hosted store was killed at a
    follower's acknowledgement (the kill in that launch's evidence: the trigger, not the
    schedule alone), by no more than one dead-store delete per acknowledgement it can have
    read (every follower's but the held one's)."""
    from zephon_chaos.launch.store_process import StoreAction
    from zephon_chaos.nemeses.hosted_store import StoreFaultLaunch
    from zephon_chaos.oracles.faults import failure_bound_s

    run = run_of(outcome, problem) if over_bound(problem) else None
    fault = None if run is None else run.fault
    if not isinstance(fault, StoreFaultLaunch) or problem.rank != LEADER:
        return False
    if fault.fault.action != "kill" or fault.point[0] not in FOLLOWER_POINTS:
        return False
    if not any(e.action is StoreAction.KILLED for e in fault.acted):
        return False  # scheduled, never done (the launch ended before the point)
    timeout_s = fault.timeout_s
    acks = max(0, run.phase.world_size - 2)
    allowed = failure_bound_s(timeout_s) + acks * DEAD_STORE_DELETE_TIMEOUTS * timeout_s
    durations = fault.verdict.durations if fault.verdict else {}
    measured = [durations[LEADER]] if LEADER in durations else []
    if run.liveness:
        measured += [p.measured_s for p in run.liveness.problems if p.rank == LEADER]
    return bool(measured) and all(s <= allowed for s in measured)


DEAD_STORE_ACK_CLEANUP = KnownDefect(
    id="dead-store-ack-cleanup",
    summary=(
        "when the store dies while the leader waits for acknowledgements, the leader's failing "
        "checkpoint() lasts about one connection timeout (1-3 aggregate_timeout_s) per "
        "acknowledgement it had read: its clean-up deletes each one on a new connection to "
        "the dead store, so the overrun grows with the world size"
    ),
    evidence=(
        "zephon 0.2.0 _internal/coordination.py RoundCoordinator._wait_for_acks (597-637): the "
        "finally (635-637) calls _delete_best_effort (380-384) for every acknowledgement read, "
        "also when the wait failed because the store did, with no budget; KVCoordinator._delete "
        "(1057-1061) is one store call per key; _internal/kvstore.py TorchKVStore._call "
        "(212-225) discards the client after any failure, so each delete builds a new TCPStore "
        "client (_client, 227-240) whose connect c10d retries within timeout=T. Standalone: "
        "tests/zephon/repro/dead_store_ack_cleanup.py (T = 1 s, store SIGKILLed after the "
        "leader read G-2 acknowledgements: the leader's call ends 1.2-1.8 s after the kill at "
        "G=3 and 13-15 s at G=9, one 1.0-3.0 s delete per acknowledgement). Found by the "
        "downstream profile: G 4 at TP 2, store_explicit, hosted store killed at ack#1, "
        "T = 2 s: rank 0 failed after 9.8 s (bound 9 s)"
    ),
    explains=_dead_store_ack_cleanup,
)
