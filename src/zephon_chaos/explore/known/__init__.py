"""Known defects of Zephon: what the explorer found, with evidence, pinned by strict xfails.

Each defect explains some problem lines of an outcome. The suite's properties judge only
the problems no known defect explains (a known defect must not turn CI red), while a strict
xfail in ``tests/zephon/test_properties.py`` runs the defect's minimal scenario, so CI alerts
when Zephon fixes it. The explorer still reports them, as ``known.<id>`` findings.

One module per defect (the two stalled-store defects, one root cause, share one), as
Toxiproxy keeps one toxic per file; ``defect`` holds the value they all are and the readings
of an outcome several of them share. A new defect is a module and a place in
:data:`KNOWN_DEFECTS`.
"""

from __future__ import annotations

from zephon_chaos.explore.known.checkpoint_after_restore import CHECKPOINT_AFTER_RESTORE
from zephon_chaos.explore.known.dead_round import (
    DEAD_ROUND_MEETS_RELAUNCH,
    FAILED_ROUND_OPEN_IN_DIR,
)
from zephon_chaos.explore.known.dead_store_ack_cleanup import (
    DEAD_STORE_ACK_CLEANUP,
    DEAD_STORE_DELETE_TIMEOUTS,
    LEADER,
)
from zephon_chaos.explore.known.defect import KnownDefect, KnownKind
from zephon_chaos.explore.known.missed_round import (
    HEALED_LINK_POISONS_RETRY,
    MISMATCH,
    MISSED_ROUND_POISONS_NEXT,
)
from zephon_chaos.explore.known.mtp_end_of_data import MTP_CAPTURE_FAILED, MTP_END_OF_DATA_WAITS
from zephon_chaos.explore.known.mtp_warning_in_child import MTP_WARNING_STAYS_IN_CHILD
from zephon_chaos.explore.known.orphaned_queue_lock import (
    KILLED_WORKER_ORPHANS_QUEUE_LOCK,
    LOCK_WAIT,
    WATCHDOG_REDISPATCH,
    WORKER_MAIN,
)
from zephon_chaos.explore.known.stalled_store import STALLED_HOSTED_STORE, STALLED_STORE_LINK
from zephon_chaos.explore.known.string_key_zero_cid import (
    NO_NEXT_CID,
    STRING_KEY_ZERO_CID_RESTORE,
)
from zephon_chaos.problem import Problem
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.runner.hangs import HangSignature

__all__ = [
    "CHECKPOINT_AFTER_RESTORE",
    "DEAD_ROUND_MEETS_RELAUNCH",
    "DEAD_STORE_ACK_CLEANUP",
    "DEAD_STORE_DELETE_TIMEOUTS",
    "FAILED_ROUND_OPEN_IN_DIR",
    "HANG_SIGNATURES",
    "HEALED_LINK_POISONS_RETRY",
    "KILLED_WORKER_ORPHANS_QUEUE_LOCK",
    "KNOWN_DEFECTS",
    "LEADER",
    "LOCK_WAIT",
    "MISMATCH",
    "MISSED_ROUND_POISONS_NEXT",
    "MTP_CAPTURE_FAILED",
    "MTP_END_OF_DATA_WAITS",
    "MTP_WARNING_STAYS_IN_CHILD",
    "NO_NEXT_CID",
    "STALLED_HOSTED_STORE",
    "STALLED_STORE_LINK",
    "STRING_KEY_ZERO_CID_RESTORE",
    "WATCHDOG_REDISPATCH",
    "WORKER_MAIN",
    "KnownDefect",
    "KnownKind",
    "explaining",
    "judged_ok",
    "unexplained",
]

KNOWN_DEFECTS: tuple[KnownDefect, ...] = (
    CHECKPOINT_AFTER_RESTORE,
    MTP_WARNING_STAYS_IN_CHILD,
    STRING_KEY_ZERO_CID_RESTORE,
    STALLED_STORE_LINK,
    STALLED_HOSTED_STORE,
    DEAD_STORE_ACK_CLEANUP,
    MISSED_ROUND_POISONS_NEXT,
    HEALED_LINK_POISONS_RETRY,
    KILLED_WORKER_ORPHANS_QUEUE_LOCK,
    MTP_END_OF_DATA_WAITS,
    FAILED_ROUND_OPEN_IN_DIR,
    DEAD_ROUND_MEETS_RELAUNCH,
)
"""The order ``explaining`` and a finding's report list them in."""

HANG_SIGNATURES: dict[str, HangSignature] = {
    d.id: d.hang for d in KNOWN_DEFECTS if d.hang is not None
}
"""The known hangs by defect id: what the explorer's runners cut a quiet launch short for."""


def explaining(outcome: ScenarioOutcome) -> list[KnownDefect]:
    """The known defects that explain at least one problem of ``outcome``."""
    return [d for d in KNOWN_DEFECTS if any(d.explains(outcome, p) for p in outcome.problems)]


def unexplained(outcome: ScenarioOutcome) -> list[Problem]:
    """Problem lines no known defect explains."""
    return [p for p in outcome.problems if not any(d.explains(outcome, p) for d in KNOWN_DEFECTS)]


def judged_ok(outcome: ScenarioOutcome) -> bool:
    """Passes once known defects are set aside: what the suite's properties assert (a
    failure the harness could not describe never passes)."""
    return (
        not unexplained(outcome)
        and not outcome.harness_problems
        and (outcome.verdict is None or outcome.verdict.ok)
    )
