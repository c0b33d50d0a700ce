"""Global-batch identity: does a resumed run deliver what an uninterrupted run delivers?

Lane streams are assembled from the phases' records (each phase keeps what it consumed before
the checkpoint the next phase restores from). Global step ``s`` is the ``s``-th batch of every
lane. On window-boundary resumes, and on any resume that keeps the topology, the streams must
equal the reference exactly. After a mid-window checkpoint resumed on another world size
Zephon documents a weaker contract: each lane gapless and duplicate-free, each window's
multiset of samples equal.

Under a DP x TP layout every rank of a DP group reads the group's lanes, so each lane's stream
is read from one rank per group (``dp_groups.representatives``), never ``tp`` times; that the
other ranks of the group read the same is ``dp_groups``' check.

Lane streams say nothing of the order in which a rank draws from its lanes, which is what its
trainer consumes: where the comparison is exact, each launch's draws are also compared, rank
by rank, with the reference's on that launch's topology (``rank_draws``, :func:`draws`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from zephon_chaos.oracles.dp_groups import representatives
from zephon_chaos.oracles.rank_draws import (
    Draw,
    DrawVerdict,
    LaneStreams,
    TurnMoved,
    judge_rank,
    reference_draws,
)
from zephon_chaos.problem import BATCH_KINDS, Area, Problem, ProblemKind
from zephon_chaos.workload.records import Batch, RankRecord, SampleId


@dataclass
class PhaseRecords:
    world_size: int
    ranks: list[RankRecord]
    keep_before_checkpoint: int | None
    """Keep batches taken before this many checkpoints (None: keep all; the last phase)."""
    tp: int = 1
    """Ranks per DP group: the streams are read from each group's first rank."""
    phase: int | None = None
    """The scenario's launch these records come from, to say where a rank diverged."""
    start: Mapping[int, int] | None = None
    """Per lane, the batches delivered before this launch (None: its draws are not judged)."""
    end: Mapping[int, int] | None = None
    """Per lane, the batches delivered up to the end of what is kept of this launch."""
    exact: bool = True
    """Zephon promises this launch continues the reference exactly (its resume, if any, was
    on a window boundary or kept the DP groups), so its ranks' draws are judged."""

    def kept(self, rec: RankRecord) -> list[Batch]:
        """The batches of ``rec`` this launch keeps (those before the next restore's point)."""
        return kept_batches(rec, self.keep_before_checkpoint)


def kept_batches(rec: RankRecord, keep_before_checkpoint: int | None) -> list[Batch]:
    """``rec``'s batches taken before ``keep_before_checkpoint`` checkpoints (None: all)."""
    cut = keep_before_checkpoint
    return [b for b in rec.batches if cut is None or b.checkpoints_before < cut]


@dataclass
class Divergence:
    step: int
    lane: int
    expected: list[SampleId] | None
    actual: list[SampleId] | None

    def describe(self) -> str:
        return (
            f"global step {self.step}, lane {self.lane}:\n"
            f"    expected {self.expected}\n    actual   {self.actual}"
        )


class Contract(StrEnum):
    """What a comparison holds a run to; the value is its name in reports."""

    IDENTICAL = "identical global batches"
    """Exact identity: every lane's stream equals the reference's."""
    MID_WINDOW = "mid-window contract (windows as multisets)"
    """After a mid-window checkpoint resumed on other DP groups: each lane gapless and
    duplicate-free, each window's multiset of samples equal."""

    @classmethod
    def of(cls, exact: bool) -> Contract:
        return cls.IDENTICAL if exact else cls.MID_WINDOW

    @property
    def exact(self) -> bool:
        return self is Contract.IDENTICAL

    @property
    def area(self) -> Area:
        """The area of the problems found under it (a finding's signature names it)."""
        return Area.BATCHES_IDENTICAL if self.exact else Area.BATCHES_MID_WINDOW


@dataclass
class Verdict:
    ok: bool
    contract: Contract
    problems: list[Problem] = field(default_factory=list)
    first_divergence: Divergence | None = None
    missing: list[SampleId] = field(default_factory=list)
    duplicated: list[SampleId] = field(default_factory=list)
    steps_compared: int = 0
    draws: DrawVerdict | None = None
    """Each rank's draws and trainer steps against the reference's (:func:`draws`)."""

    def found(self) -> list[Problem]:
        return list(self.problems)

    @property
    def streams_ok(self) -> bool:
        """The lane streams alone hold: what is wrong, if anything, is only in ranks' draws."""
        drawn = set() if self.draws is None else set(self.draws.found())
        return all(p in drawn for p in self.problems)

    def add_draws(self, draws: DrawVerdict) -> None:
        """Judge the ranks' draws too: their divergences become problems of the verdict."""
        self.draws = draws
        self.problems += draws.found()
        self.ok = self.ok and draws.ok

    lost_by_lane: dict[int, int] = field(default_factory=dict)
    """Per lane, how many of the samples the reference delivered there were never delivered."""
    repeated_by_lane: dict[int, int] = field(default_factory=dict)
    """Per lane, how many deliveries there were more than the reference's (a sample again)."""

    @property
    def kind(self) -> ProblemKind:
        """The violation's kind: the first of ``BATCH_KINDS`` among its problems."""
        kinds = {p.kind for p in self.problems}
        kinds |= {ProblemKind.MISSING} if self.missing else set()
        kinds |= {ProblemKind.DUPLICATED} if self.duplicated else set()
        return next((k for k in BATCH_KINDS if k in kinds), ProblemKind.DIVERGENT)

    def describe(self) -> str:
        if self.ok and not self.steps_compared:  # nothing was kept to hold to the contract
            return f"nothing compared ({self.contract}: no global step was kept)"
        if self.ok:
            return f"ok ({self.contract}, {self.steps_compared} global steps compared)"
        lines = [f"VIOLATION of {self.contract}:"]
        lines += [f"  - {p}" for p in self.problems]
        if self.first_divergence is not None:
            lines.append("  first divergent " + self.first_divergence.describe())
        if self.missing:
            lines.append(f"  missing samples ({len(self.missing)}): {self.missing[:10]}")
        if self.duplicated:
            lines.append(f"  duplicated samples ({len(self.duplicated)}): {self.duplicated[:10]}")
        return "\n".join(lines)


def lane_streams(
    ranks: list[RankRecord], keep_before_checkpoint: int | None = None, tp: int = 1
) -> LaneStreams:
    """Per lane, the batches in the order their rank (one of each DP group) consumed them."""
    streams: LaneStreams = {}
    for rec in representatives(ranks, tp):
        for b in kept_batches(rec, keep_before_checkpoint):
            streams.setdefault(b.lane, []).append(list(b.ids))
    return streams


def assemble(phases: list[PhaseRecords]) -> LaneStreams:
    """Concatenate each lane's kept batches across phases."""
    out: LaneStreams = {}
    for ph in phases:
        for lane, batches in lane_streams(ph.ranks, ph.keep_before_checkpoint, ph.tp).items():
            out.setdefault(lane, []).extend(batches)
    return out


def compare(
    reference: LaneStreams,
    actual: LaneStreams,
    expected_lengths: dict[int, int],
    *,
    exact: bool,
) -> Verdict:
    """Compare ``actual`` with ``reference`` over each lane's expected length."""
    contract = Contract.of(exact)
    area = contract.area
    problems: list[Problem] = []

    def found(kind: ProblemKind, text: str) -> None:
        problems.append(Problem(area, kind, text))

    lanes = sorted(set(reference) | set(actual) | set(expected_lengths))
    extra_lanes = sorted(set(actual) - set(expected_lengths))
    if extra_lanes:
        found(ProblemKind.UNKNOWN_LANES, f"batches from unknown lanes {extra_lanes}")
    want: dict[int, list[list[SampleId]]] = {
        lane: reference.get(lane, [])[: expected_lengths.get(lane, 0)] for lane in lanes
    }
    for lane in lanes:
        got_n, want_n = len(actual.get(lane, [])), len(want[lane])
        if got_n != want_n:
            found(
                ProblemKind.LANE_COUNT, f"lane {lane} delivered {got_n} batches, expected {want_n}"
            )
    steps = max((len(v) for v in want.values()), default=0)
    first: Divergence | None = None
    for step in range(steps):
        for lane in lanes:
            exp = want[lane][step] if step < len(want[lane]) else None
            got = actual.get(lane, [])[step] if step < len(actual.get(lane, [])) else None
            if exact and exp != got:
                first = first or Divergence(step, lane, exp, got)
        if not exact:
            exp_window = Counter(
                s for lane in lanes for b in want[lane][step : step + 1] for s in b
            )
            got_window = Counter(
                s for lane in lanes for b in actual.get(lane, [])[step : step + 1] for s in b
            )
            if exp_window != got_window and first is None:
                lane = next(
                    (
                        ln
                        for ln in lanes
                        if want[ln][step : step + 1] != actual.get(ln, [])[step : step + 1]
                    ),
                    lanes[0] if lanes else -1,
                )
                first = Divergence(
                    step,
                    lane,
                    (want[lane][step : step + 1] or [None])[0],
                    (actual.get(lane, [])[step : step + 1] or [None])[0],
                )
                found(ProblemKind.WINDOW, f"window {step} holds other samples than the reference's")
        if first is not None and exact:
            break
    exp_all = Counter(s for lane in lanes for b in want[lane] for s in b)
    got_all = Counter(s for lane in lanes for b in actual.get(lane, []) for s in b)
    missing = sorted((exp_all - got_all).elements())
    duplicated = sorted(s for s, n in got_all.items() if n > exp_all.get(s, 0))
    if not exact:
        # A permuted window may move samples between lanes; a lane must still not repeat one.
        for lane in lanes:
            seen = Counter(s for b in actual.get(lane, []) for s in b)
            dups = sorted(s for s, n in seen.items() if n > exp_all.get(s, 0))
            if dups:
                found(ProblemKind.DUPLICATED, f"lane {lane} repeats samples {dups[:5]}")
    lost_by_lane, repeated_by_lane = by_lane(want, actual, missing, duplicated)
    if first is not None and exact:
        text = f"first divergence at global step {first.step}, lane {first.lane}"
        problems.insert(0, Problem(area, ProblemKind.DIVERGENT, text))
    if missing:
        found(ProblemKind.MISSING, f"{len(missing)} sample(s) of the reference never delivered")
    if duplicated:
        more = f"{len(duplicated)} sample(s) delivered more often than the reference"
        found(ProblemKind.DUPLICATED, more)
    return Verdict(
        ok=not problems,
        contract=contract,
        problems=problems,
        first_divergence=first,
        missing=missing,
        duplicated=duplicated,
        steps_compared=steps,
        lost_by_lane=lost_by_lane,
        repeated_by_lane=repeated_by_lane,
    )


def draws(reference: LaneStreams, phases: list[PhaseRecords], *, clip: bool = True) -> DrawVerdict:
    """Each judged launch's draws, one rank per DP group (``dp_groups`` holds its peers to
    it), against the reference's on the launch's topology from the launch's resume point.
    A rank on lanes no rank of the launch before drew together has no saved turn: where it
    starts is Zephon's to choose (``rank_draws``'s note). ``clip``: no lane goes past the
    reference's end (a run that ran dry)."""
    verdict = DrawVerdict()
    saved: dict[tuple[int, ...], int | None] | None = None  # lanes -> the turn's next lane
    for ph in phases:
        groups = representatives(ph.ranks, ph.tp)
        turns, saved = saved, _saved_turns(ph, groups, saved or {})
        if not ph.exact or ph.start is None or ph.end is None:
            continue
        end = ph.end
        if clip:
            end = {lane: min(n, len(reference.get(lane, []))) for lane, n in end.items()}
        for rec in groups:
            drawn: list[Draw] = [(b.lane, list(b.ids)) for b in ph.kept(rec)]
            # A saved turn goes on where the last launch left it (Zephon restores
            # ``rr_next_idx`` by lane list), which a moved turn before may have shifted.
            going_on = None if turns is None else turns.get(tuple(rec.lanes))
            expected = reference_draws(reference, rec.lanes, ph.start, end, going_on)
            if turns is not None and tuple(rec.lanes) not in turns and drawn and expected:
                moved = reference_draws(reference, rec.lanes, ph.start, end, drawn[0][0])
                if moved[0][0] != expected[0][0]:
                    turn = TurnMoved(ph.phase, rec.rank, expected[0][0], moved[0][0])
                    verdict.turns_moved.append(turn)
                    expected = moved
            offset = sum(ph.start.get(lane, 0) for lane in rec.lanes)
            verdict.problems += judge_rank(ph.phase, rec.rank, rec.lanes, drawn, expected, offset)
            verdict.ranks_compared += 1
    return verdict


def _saved_turns(
    ph: PhaseRecords, groups: list[RankRecord], before: dict[tuple[int, ...], int | None]
) -> dict[tuple[int, ...], int | None]:
    """The turns the checkpoint ``ph`` hands on saves, by lane list: where each goes on. A
    rank that drew nothing hands on the turn it was given, if any; one given none and
    drawing nothing saves none (the next launch's start is Zephon's to choose)."""
    out: dict[tuple[int, ...], int | None] = {}
    for rec in groups:
        lanes = tuple(rec.lanes)
        going_on = _next_in_turn(ph, rec)
        if going_on is None:
            going_on = before.get(lanes)
        if going_on is not None:
            out[lanes] = going_on
    return out


def _next_in_turn(ph: PhaseRecords, rec: RankRecord) -> int | None:
    """The lane after the last one ``rec`` drew of what ``ph`` keeps: where its turn goes on
    in the launch that restores the checkpoint (None: it drew nothing)."""
    kept = ph.kept(rec)
    if not kept:
        return None
    lanes = list(rec.lanes)
    return lanes[(lanes.index(kept[-1].lane) + 1) % len(lanes)]


def by_lane(
    want: LaneStreams, actual: LaneStreams, missing: list[SampleId], duplicated: list[SampleId]
) -> tuple[dict[int, int], dict[int, int]]:
    """Per lane, its samples short of the reference's that no lane delivered (lost), and its
    samples over the reference's that were delivered too often (repeated); lanes with none
    left out. A sample moved to another lane (mid-window) counts in neither."""
    never = Counter(missing)
    again = set(duplicated)
    lost: dict[int, int] = {}
    repeated: dict[int, int] = {}
    for lane in sorted(set(want) | set(actual)):
        wanted = Counter(s for b in want.get(lane, []) for s in b)
        got = Counter(s for b in actual.get(lane, []) for s in b)
        n_lost = sum(((wanted - got) & never).values())
        n_again = sum(n for s, n in (got - wanted).items() if s in again)
        if n_lost:
            lost[lane] = n_lost
        if n_again:
            repeated[lane] = n_again
    return lost, repeated
