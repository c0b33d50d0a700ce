"""Ranks of one data-parallel group consume identical batches.

Zephon maps lanes to DP groups, and every rank of a group (its tensor-parallel peers) reads
that group's lanes on its own (``zephon/_internal/engine.py``: "All ranks with same
dp_group_id independently read same lanes"). A TP group that trains on different samples
on different ranks is silently wrong, so each peer's batches (lane and sample ids, in order)
must equal those of the group's lowest rank, the one the global-batch oracle reads for the
group (:func:`representatives`).

Over the batches both ranks recorded: a launch a fault ended stops ranks at different points.
Where both ranks ended their loop, their counts must match too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zephon_chaos.lanes import dp_group
from zephon_chaos.problem import Area, Problem, ProblemKind, ProblemsVerdict
from zephon_chaos.workload.records import Batch, RankRecord, SampleId


@dataclass(frozen=True)
class GroupDivergence:
    """The first batch where ``rank`` differs from its group's representative ``leader``."""

    group: int
    leader: int
    rank: int
    position: int
    """Index of the batch in both ranks' records."""
    expected: tuple[int, list[SampleId]] | None
    """The leader's (lane, ids) there; None: it has no such batch."""
    actual: tuple[int, list[SampleId]] | None

    def describe(self) -> str:
        return (
            f"DP group {self.group} diverged: rank {self.rank}'s batch {self.position} differs "
            f"from rank {self.leader}'s (lane, ids): expected {self.expected}, "
            f"actual {self.actual}"
        )

    def problem(self) -> Problem:
        kind = ProblemKind.DP_GROUP_DIVERGED
        return Problem(Area.BATCHES_IDENTICAL, kind, self.describe(), rank=self.rank)


@dataclass
class GroupVerdict(ProblemsVerdict[GroupDivergence]):
    """Every rank's first divergence from its DP group's representative, if any."""

    problems: list[GroupDivergence] = field(default_factory=list)


def representatives(ranks: list[RankRecord], tp: int) -> list[RankRecord]:
    """One record per DP group: its lowest rank's, so each lane stream is counted once."""
    if tp <= 1:
        return ranks
    return [rec for rec in ranks if rec.rank % tp == 0]


def divergences(ranks: list[RankRecord], tp: int) -> list[GroupDivergence]:
    """The first divergence of every rank from its DP group's representative, if any."""
    if tp <= 1:
        return []
    by_rank = {rec.rank: rec for rec in ranks}
    out: list[GroupDivergence] = []
    for rec in ranks:
        leader = by_rank.get(dp_group(rec.rank, tp) * tp)
        if leader is None or leader is rec:
            continue
        found = _first_difference(leader, rec)
        if found is not None:
            position, expected, actual = found
            out.append(
                GroupDivergence(
                    dp_group(rec.rank, tp), leader.rank, rec.rank, position, expected, actual
                )
            )
    return out


def judge(ranks: list[RankRecord], tp: int) -> GroupVerdict:
    return GroupVerdict(divergences(ranks, tp))


def _first_difference(
    leader: RankRecord, peer: RankRecord
) -> tuple[int, tuple[int, list[SampleId]] | None, tuple[int, list[SampleId]] | None] | None:
    mine, theirs = [_key(b) for b in leader.batches], [_key(b) for b in peer.batches]
    for n, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a != b:
            return n, a, b
    if leader.ended and peer.ended and len(mine) != len(theirs):
        n = min(len(mine), len(theirs))
        return n, (mine[n] if n < len(mine) else None), (theirs[n] if n < len(theirs) else None)
    return None


def _key(b: Batch) -> tuple[int, list[SampleId]]:
    return b.lane, list(b.ids)
