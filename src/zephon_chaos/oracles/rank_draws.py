"""What a trainer sees: each rank's draws in order, and the samples of each of its steps.

A trainer consumes its rank's batches as one sequence and groups consecutive microbatches
into optimizer steps. The lane-stream comparison (``global_batches``) cannot see the order in
which a rank draws from its lanes: a resume that keeps every lane's stream but changes that
order passes it. Where Zephon promises exact identity, each rank's draws after the resume
point must also be the reference's on that topology, in order (``rank-sequence-diverged``),
and so must the samples of each trainer step (``trainer-step-diverged``).

The workload has no gradient-accumulation setting: a trainer step is the batches a rank
draws in one global step, one per lane it owns, counted from the start of the run (the
recipe contract's ``microbatches`` are the same). A trainer resumed mid-step finishes that
step with the draws after the resume.

The reference on a topology is computed from the uninterrupted reference's lane streams and
Zephon's draw order (``Engine._lane_rr_iter``): the rank's lanes in lane order, one batch of
each per turn, a lane with nothing left skipped; an uninterrupted run starts at the first. A
rank resumed on lanes some rank drew as one turn before the checkpoint continues that turn
where it stopped (Zephon restores ``rr_next_idx``, keyed by the lane list).

A rank resumed on lanes no rank drew together before has no saved turn, and Zephon starts
it at the least advanced lane by source progress (``Engine._ensure_rr_next_idx``), which with
a filter need not be the first: its draws are then the reference's rotated, every trainer
step the same samples in another order. That start is accepted and kept as a
:class:`TurnMoved` fact, not a problem; every draw after it must follow the turn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from zephon_chaos.problem import Area, Problem, ProblemKind, ProblemsVerdict
from zephon_chaos.workload.records import SampleId

LaneStreams = dict[int, list[list[SampleId]]]
"""Per lane, its batches (sample ids) in the order the lane delivered them."""
Draw = tuple[int, list[SampleId]]
"""One batch as a rank drew it: (lane, sample ids)."""


def reference_draws(
    streams: LaneStreams,
    lanes: Sequence[int],
    start: Mapping[int, int],
    end: Mapping[int, int],
    first: int | None = None,
) -> list[Draw]:
    """The draws of a rank owning ``lanes`` from ``start`` (batches each lane delivered
    before) up to ``end``, in Zephon's order: round robin in lane order, skipping a lane
    with nothing left, from the first lane (among those with batches left) that has drawn
    least, which is where an interrupted turn goes on; or from ``first``, if it is one of
    those least drawn (a turn with no saved position)."""
    pos = {lane: start.get(lane, 0) for lane in lanes}
    stop = {lane: min(end.get(lane, 0), len(streams.get(lane, []))) for lane in lanes}
    live = [lane for lane in lanes if pos[lane] < stop[lane]]
    if not live:
        return []
    fewest = [lane for lane in live if pos[lane] == min(pos[x] for x in live)]
    turn = lanes.index(first if first in fewest else fewest[0])
    out: list[Draw] = []
    while any(pos[lane] < stop[lane] for lane in lanes):
        lane = lanes[turn]
        turn = (turn + 1) % len(lanes)
        if pos[lane] < stop[lane]:
            out.append((lane, list(streams[lane][pos[lane]])))
            pos[lane] += 1
    return out


@dataclass(frozen=True)
class RankSequenceDivergence:
    """The first draw after the resume point where a rank differs from the reference."""

    phase: int | None
    rank: int
    position: int
    """Index of the draw among the launch's kept draws (0: the first after the resume)."""
    expected: Draw | None
    """The reference's draw there; None: the rank drew more than the reference."""
    actual: Draw | None
    """The rank's draw there; None: it drew fewer."""

    def describe(self) -> str:
        return (
            f"{_where(self.phase, self.rank)} drew out of the reference's order: draw "
            f"{self.position} after the resume point: expected {_draw(self.expected)}, "
            f"actual {_draw(self.actual)}"
        )

    def problem(self) -> Problem:
        kind = ProblemKind.RANK_SEQUENCE_DIVERGED
        return Problem(Area.BATCHES_IDENTICAL, kind, self.describe(), self.phase, rank=self.rank)


@dataclass(frozen=True)
class TrainerStepDivergence:
    """The first trainer step of a rank whose samples differ from the reference's."""

    phase: int | None
    rank: int
    step: int
    """The trainer step, counted from the start of the run on this topology."""
    expected: list[SampleId]
    """The reference's samples of that step drawn in this launch, sorted (a multiset)."""
    actual: list[SampleId]

    def describe(self) -> str:
        return (
            f"{_where(self.phase, self.rank)} trained step {self.step} on other samples than "
            f"the reference: expected {self.expected}, actual {self.actual}"
        )

    def problem(self) -> Problem:
        kind = ProblemKind.TRAINER_STEP_DIVERGED
        return Problem(Area.BATCHES_IDENTICAL, kind, self.describe(), self.phase, rank=self.rank)


RankDrawDivergence = RankSequenceDivergence | TrainerStepDivergence


@dataclass(frozen=True)
class TurnMoved:
    """A rank resumed on new lanes began its turn at another lane than an uninterrupted run
    on its topology would (Zephon's choice without a saved turn: see the module's note)."""

    phase: int | None
    rank: int
    expected_lane: int
    actual_lane: int


@dataclass
class DrawVerdict(ProblemsVerdict[RankDrawDivergence]):
    """Per rank and launch compared, its first divergent draw and first divergent step."""

    problems: list[RankDrawDivergence] = field(default_factory=list)
    ranks_compared: int = 0
    turns_moved: list[TurnMoved] = field(default_factory=list)
    """Ranks resumed on new lanes whose turn began elsewhere: facts, not problems."""

    def sequences(self) -> list[RankSequenceDivergence]:
        return [p for p in self.problems if isinstance(p, RankSequenceDivergence)]

    def trainer_steps(self) -> list[TrainerStepDivergence]:
        return [p for p in self.problems if isinstance(p, TrainerStepDivergence)]


def judge_rank(
    phase: int | None,
    rank: int,
    lanes: Sequence[int],
    drawn: Sequence[Draw],
    expected: Sequence[Draw],
    offset: int,
) -> list[RankDrawDivergence]:
    """``drawn`` against ``expected`` (both from the resume point, which is draw ``offset``
    of the rank's run on its topology): the first divergent draw and trainer step, if any."""
    out: list[RankDrawDivergence] = []
    for n in range(max(len(drawn), len(expected))):
        exp = expected[n] if n < len(expected) else None
        got = drawn[n] if n < len(drawn) else None
        if exp != got:
            out.append(RankSequenceDivergence(phase, rank, n, exp, got))
            break
    per_step = max(1, len(lanes))
    want, have = _steps(expected, offset, per_step), _steps(drawn, offset, per_step)
    for step in sorted(set(want) | set(have)):
        exp_ids, got_ids = want.get(step, Counter()), have.get(step, Counter())
        if exp_ids != got_ids:
            out.append(
                TrainerStepDivergence(
                    phase, rank, step, sorted(exp_ids.elements()), sorted(got_ids.elements())
                )
            )
            break
    return out


def _steps(draws: Sequence[Draw], offset: int, per_step: int) -> dict[int, Counter[SampleId]]:
    """The samples of each trainer step among ``draws`` (draw ``offset`` onwards)."""
    out: dict[int, Counter[SampleId]] = {}
    for n, (_, ids) in enumerate(draws):
        out.setdefault((offset + n) // per_step, Counter()).update(ids)
    return out


def _draw(draw: Draw | None) -> str:
    return "nothing" if draw is None else f"{draw[1]} from lane {draw[0]}"


def _where(phase: int | None, rank: int) -> str:
    return f"rank {rank}" if phase is None else f"phase {phase}: rank {rank}"
