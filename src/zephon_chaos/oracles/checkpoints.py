"""Checkpoint invariants: one merged checkpoint, the same on every rank, covering all lanes.

And Zephon's documented warning: a checkpoint whose per-lane counts are unequal (mid-window)
warns; one on a window boundary does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.workload.records import RankRecord

MID_WINDOW_TEXT = "Checkpoint taken mid-window"


@dataclass
class CheckpointFacts:
    index: int
    ok_ranks: list[int]
    failed: dict[int, str]
    digests: dict[int, str | None]
    lane_counts: dict[int, int]
    covered: dict[int, list[int]]
    warned: list[int]

    @property
    def mid_window(self) -> bool:
        counts = list(self.lane_counts.values())
        return bool(counts) and min(counts) != max(counts)

    @property
    def completed(self) -> bool:
        """Rank 0 completed it, so persisted it, no rank saw it fail and every rank got the
        same one: one a later launch can restore. The runner and the fault drivers ask this
        one question alike. (Ranks that got different merged checkpoints of one index are
        free-running ones that drifted, each judged by resuming it: ``runner.verify``.)"""
        return not self.failed and 0 in self.ok_ranks and len(set(self.digests.values())) <= 1


def lost(facts: Iterable[CheckpointFacts], before: int) -> list[int]:
    """Of checkpoints ``0 .. before - 1``, those that did not complete (no record of it, or
    not :attr:`CheckpointFacts.completed`): a fault timed after them must not cost them."""
    done = {f.index for f in facts if f.completed}
    return [j for j in range(before) if j not in done]


@dataclass
class CheckpointVerdict:
    """The launch's checkpoints as the ranks recorded them (``facts``) and their problems."""

    ok: bool
    facts: list[CheckpointFacts] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def found(self) -> list[Problem]:
        return list(self.problems)


def gather(ranks: list[RankRecord]) -> list[CheckpointFacts]:
    indices = sorted({c.index for r in ranks for c in r.checkpoints})
    out = []
    for index in indices:
        facts = CheckpointFacts(index, [], {}, {}, {}, {}, [])
        for rec in ranks:
            for ev in rec.checkpoints:
                if ev.index != index:
                    continue
                facts.lane_counts.update(ev.lane_counts)
                if ev.ok:
                    facts.ok_ranks.append(rec.rank)
                    facts.digests[rec.rank] = ev.digest
                    facts.covered[rec.rank] = ev.lanes_covered
                else:
                    facts.failed[rec.rank] = ev.error or "failed"
                if any(MID_WINDOW_TEXT in w for w in ev.warnings):
                    facts.warned.append(rec.rank)
        out.append(facts)
    return out


def check(
    ranks: list[RankRecord],
    canonical_replicas: int,
    *,
    failures_judged: bool = False,
    by_resuming: bool = False,
) -> CheckpointVerdict:
    """Problems of the launch's checkpoints. ``failures_judged``: a failed checkpoint is the
    policy oracle's to judge (``skip``: a failure the launch records and trains past).
    ``by_resuming``: free-running ranks that may drift apart (``independent`` retry beside a
    lag): a failure is the policy oracle's, and which merged checkpoint a rank got, and its
    mid-window warning, are judged by resuming each (``runner.verify``): only what every
    merged checkpoint must cover is checked here."""
    problems: list[Problem] = []
    facts = gather(ranks)
    world = len(ranks)
    for f in facts:
        label = f"checkpoint {f.index}"

        def found(
            kind: ProblemKind, text: str, rank: int | None = None, f: CheckpointFacts = f
        ) -> None:
            problems.append(Problem(Area.CHECKPOINT, kind, text, checkpoint=f.index, rank=rank))

        if f.failed and (failures_judged or by_resuming):
            continue
        if f.failed:
            found(
                ProblemKind.FAILED,
                f"{label} failed on ranks {sorted(f.failed)}: {next(iter(f.failed.values()))}",
                min(f.failed),
            )
            continue
        if len(f.ok_ranks) != world:
            missing = sorted(set(range(world)) - set(f.ok_ranks))
            found(
                ProblemKind.MISSING_RECORD,
                f"{label} has no record from ranks {missing}",
                missing[0],
            )
        for rank, covered in f.covered.items():
            if covered != list(range(canonical_replicas)):
                found(
                    ProblemKind.COVERAGE,
                    f"{label} on rank {rank} covers lanes {covered}, not all {canonical_replicas}",
                    rank,
                )
        if by_resuming:
            continue
        if len(set(f.digests.values())) > 1:
            found(ProblemKind.DIFFERS, f"{label} differs between ranks: digests {f.digests}")
        if f.mid_window and not f.warned:
            found(
                ProblemKind.NO_WARNING,
                f"{label} was taken mid-window ({f.lane_counts}) but no rank warned",
            )
        if not f.mid_window and f.warned:
            found(
                ProblemKind.SPURIOUS_WARNING,
                f"{label} was on a window boundary but ranks {f.warned} warned mid-window",
                f.warned[0],
            )
    return CheckpointVerdict(ok=not problems, facts=facts, problems=problems)
