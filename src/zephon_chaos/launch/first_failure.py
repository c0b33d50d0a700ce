"""Which failed rank of a torchrun group failed first: the one a result names as its cause.

Apart from the group's bookkeeping (``launch.group``), so that the ranking is a function of
typed facts, tested without launching anything.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from zephon_chaos.launch.result import RankOutcome


@dataclass(frozen=True)
class FailedRank:
    """What is known of one rank that exited non-zero."""

    outcome: RankOutcome
    reported: bool
    """Its agent's failure summary lists it."""
    root_cause: bool
    """torchelastic named it the root cause."""
    stamp: float = float("inf")
    """Its error file's timestamp (whole seconds), if it wrote one."""
    exited_at: float | None = None
    """Its own exit note: the start of its exit (every normal exit writes one)."""
    died_at: float | None = None
    """When the death watch saw it die (a rank killed by a signal notes nothing)."""
    raised_at: float | None = None
    """When its error left its ``main``: before the atexit teardown (MTP children, process
    group) that its peers may fail of, and so before its exit note."""

    @property
    def torn_down(self) -> bool:
        """The harness killed it, and no agent reported it: a consequence of the teardown."""
        return self.outcome.killed_by_harness and not self.reported

    @property
    def stopped(self) -> bool:
        """Its agent stopped it (SIGTERM, once another rank had failed): a consequence."""
        o = self.outcome
        return o.exitcode == -signal.SIGTERM and o.self_signal is None and not o.killed_by_harness

    def key(self) -> tuple[bool, bool, bool, float]:
        """Consequences last; then torchelastic's root cause, a rank the harness did not
        kill, the earliest error file."""
        return (self.stopped, not (self.reported and self.root_cause), self.torn_down, self.stamp)

    def failed_at(self) -> float | None:
        """When it failed, where its own records say, else where the death watch saw it; a
        rank its agent stopped or the harness tore down died of another's failure, after it."""
        if self.torn_down:
            return None
        if self.exited_at is not None:
            return self.exited_at
        return None if self.stopped else self.died_at


def first_failure(failed: list[FailedRank]) -> RankOutcome | None:
    """The rank that failed first, of ``failed`` (in rank order: ties go to the lower rank).

    torchelastic's root cause is the earliest whole-second timestamp, a tie when two ranks
    fail within one poll; where the ranked first and others were timed, the times decide."""
    if not failed:
        return None
    first = min(failed, key=FailedRank.key)
    timed = [(t, f) for f in failed if (t := f.failed_at()) is not None]
    raised = [(f.raised_at, f) for _, f in timed if f.raised_at is not None]
    if len(raised) == len(timed):
        # Every timed rank raised: the moments their errors left main order them. A rank
        # killed by a signal has only the death watch's stamp, which may lag a peer's raise
        # of that death, so then the exit notes decide, as they always did.
        timed = raised
    if first.failed_at() is not None:
        first = min(timed, key=lambda tf: tf[0])[1]
    return first.outcome
