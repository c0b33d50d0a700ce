"""What a trainer sees, on synthetic records: each rank's draws in order, its trainer steps."""

from __future__ import annotations

from zephon_chaos.oracles.global_batches import PhaseRecords, assemble, compare, lane_streams
from zephon_chaos.oracles.rank_draws import (
    RankSequenceDivergence,
    TrainerStepDivergence,
    TurnMoved,
    reference_draws,
)
from zephon_chaos.problem import Area, ProblemKind
from zephon_chaos.runner import Resume
from zephon_chaos.workload.records import Batch, RankRecord, SampleId

C = 4


def ids(lane: int, s: int) -> list[SampleId]:
    """Lane ``lane``'s ``s``-th batch."""
    return [(0, lane, 2 * s), (0, lane, 2 * s + 1)]


def rank(r: int, lanes: list[int], steps: range, ckpts: int = 0, tp: int = 1) -> RankRecord:
    """A rank drawing ``steps`` global steps in turns over ``lanes``, as Zephon does."""
    batches = [
        Batch(n, lane, ids(lane, s), ckpts)
        for n, (s, lane) in enumerate((s, lane) for s in steps for lane in lanes)
    ]
    return RankRecord(r, lanes=lanes, tp=tp, batches=batches)


REFERENCE = [rank(0, [0, 1], range(6)), rank(1, [2, 3], range(6))]
"""The uninterrupted run at G = 2, six global steps."""


def resumed_on_one_rank(last: RankRecord, *, exact: bool = True) -> Resume:
    """Two ranks take two steps and checkpoint on a window boundary; one rank takes two more."""
    before = [rank(0, [0, 1], range(2)), rank(1, [2, 3], range(2))]
    track = Resume().kept_with(PhaseRecords(2, before, 1, phase=0), dict.fromkeys(range(C), 2))
    if not exact:
        track = Resume(kept=track.kept, expected=track.expected, exact=False)
    return track.kept_with(PhaseRecords(1, [last], None, phase=1), dict.fromkeys(range(C), 4))


def reorder(rec: RankRecord, order: list[int]) -> RankRecord:
    """``rec`` with its first draws' contents in ``order``: each lane's stream unchanged."""
    moved = [rec.batches[i] for i in order]
    slots = rec.batches[: len(order)]
    pairs = zip(slots, moved, strict=True)
    rec.batches[: len(order)] = [
        Batch(slot.index, b.lane, b.ids, slot.checkpoints_before) for slot, b in pairs
    ]
    return rec


def test_zephon_draws_a_ranks_lanes_in_turns_from_where_its_checkpoint_left_the_turn() -> None:
    streams = lane_streams(REFERENCE)
    assert [lane for lane, _ in reference_draws(streams, [0, 1], {}, {0: 2, 1: 2})] == [0, 1, 0, 1]
    # mid-window: lane 0 drew once more, so the turn goes on at lane 1
    mid = reference_draws(streams, [0, 1, 2], {0: 1, 1: 0, 2: 0}, {0: 2, 1: 2, 2: 2})
    assert [(lane, b[0][2] // 2) for lane, b in mid] == [(1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    # a lane with nothing left is skipped, and the turn starts at the least drawn live lane
    short = {0: streams[0][:2], 1: streams[1], 2: streams[2]}
    dry = reference_draws(short, [0, 1, 2], {0: 2, 1: 3, 2: 2}, dict.fromkeys(range(3), 5))
    assert [lane for lane, _ in dry] == [2, 1, 2, 1, 2]


def test_undisturbed_resumes_pass_and_every_rank_is_compared() -> None:
    verdict = resumed_on_one_rank(rank(0, [0, 1, 2, 3], range(2, 4))).verdict(REFERENCE)
    assert verdict is not None and verdict.ok, verdict.describe()
    assert verdict.draws is not None and verdict.draws.ranks_compared == 3


def test_a_swapped_draw_order_passes_the_lane_streams_but_not_the_rank_sequence() -> None:
    track = resumed_on_one_rank(reorder(rank(0, [0, 1, 2, 3], range(2, 4)), [1, 0]))
    streams, kept = lane_streams(REFERENCE), assemble(list(track.kept))
    lanes_only = compare(streams, kept, track.expected, exact=True)
    assert lanes_only.ok, lanes_only.describe()
    verdict = track.verdict(REFERENCE)
    assert verdict is not None and not verdict.ok and verdict.draws is not None
    # new lanes, so the turn may begin at lane 1; then lane 2 is due, not lane 0
    assert verdict.draws.problems == [
        RankSequenceDivergence(1, 0, 1, (2, ids(2, 2)), (0, ids(0, 2)))
    ]
    assert verdict.kind is ProblemKind.RANK_SEQUENCE_DIVERGED
    [problem] = verdict.problems
    assert (problem.area, problem.kind, problem.phase, problem.rank) == (
        Area.BATCHES_IDENTICAL,
        ProblemKind.RANK_SEQUENCE_DIVERGED,
        1,
        0,
    )


def test_a_turn_begun_at_another_lane_is_a_fact_on_new_lanes_and_a_problem_on_saved_ones() -> None:
    """Zephon starts a rank with no saved turn at its least advanced lane by source progress."""
    rotated = reorder(rank(0, [0, 1, 2, 3], range(2, 4)), [2, 3, 0, 1, 6, 7, 4, 5])
    verdict = resumed_on_one_rank(rotated).verdict(REFERENCE)
    assert verdict is not None and verdict.ok and verdict.draws is not None
    assert verdict.draws.turns_moved == [TurnMoved(1, 0, 0, 2)]
    # the same two ranks resume on the lanes they drew: their saved turn begins at lane 0
    before = [rank(0, [0, 1], range(2)), rank(1, [2, 3], range(2))]
    track = Resume().kept_with(PhaseRecords(2, before, 1, phase=0), dict.fromkeys(range(C), 2))
    after = [reorder(rank(0, [0, 1], range(2, 4)), [1, 0, 3, 2]), rank(1, [2, 3], range(2, 4))]
    track = track.kept_with(PhaseRecords(2, after, None, phase=1), dict.fromkeys(range(C), 4))
    verdict = track.verdict(REFERENCE)
    assert verdict is not None and verdict.draws is not None
    assert [(d.rank, d.position) for d in verdict.draws.sequences()] == [(0, 0)]
    assert verdict.draws.turns_moved == []


def test_draws_regrouped_across_steps_change_a_trainer_step() -> None:
    # lane by lane over two steps: 0 0 1 1 2 2 3 3 instead of 0 1 2 3 0 1 2 3
    rec = reorder(rank(0, [0, 1, 2, 3], range(2, 4)), [0, 4, 1, 5, 2, 6, 3, 7])
    verdict = resumed_on_one_rank(rec).verdict(REFERENCE)
    assert verdict is not None and verdict.draws is not None
    assert verdict.draws.sequences() == [
        RankSequenceDivergence(1, 0, 1, (1, ids(1, 2)), (0, ids(0, 3)))
    ]
    [step] = verdict.draws.trainer_steps()
    # the rank's draws 8.. on G = 1: its trainer step 2 is the reference's global step 2
    want = sorted(i for lane in range(C) for i in ids(lane, 2))
    got = sorted([*ids(0, 2), *ids(0, 3), *ids(1, 2), *ids(1, 3)])
    assert step == TrainerStepDivergence(1, 0, 2, want, got)
    assert verdict.kind is ProblemKind.TRAINER_STEP_DIVERGED


def test_a_rank_that_draws_short_diverges_where_it_stopped() -> None:
    rec = rank(0, [0, 1, 2, 3], range(2, 4))
    rec.batches = rec.batches[:-1]
    verdict = resumed_on_one_rank(rec).verdict(REFERENCE)
    assert verdict is not None and verdict.draws is not None
    [seq] = verdict.draws.sequences()
    assert (seq.position, seq.expected, seq.actual) == (7, (3, ids(3, 3)), None)


def test_a_mid_window_resume_on_the_same_lanes_goes_on_with_the_turn_and_the_step() -> None:
    """Checkpoint after 1 step and lane 0's next batch; the same two ranks resume."""
    before = [
        RankRecord(0, 2, [0, 1], batches=rank(0, [0, 1], range(2)).batches[:3]),
        rank(1, [2, 3], range(1)),
    ]
    counts = {0: 2, 1: 1, 2: 1, 3: 1}
    track = Resume().kept_with(PhaseRecords(2, before, None, phase=0), counts)
    after = [RankRecord(0, 2, [0, 1], batches=rank(0, [0, 1], range(1, 3)).batches[1:])]
    after.append(rank(1, [2, 3], range(1, 3)))
    good = track.kept_with(PhaseRecords(2, after, None, phase=1), dict.fromkeys(range(C), 3))
    verdict = good.verdict(REFERENCE)
    assert verdict is not None and verdict.ok, verdict.describe()
    # resumed at lane 0 instead: draw 0 diverges, and the trainer step it finishes too
    after[0] = reorder(after[0], [1, 0])
    bad = track.kept_with(PhaseRecords(2, after, None, phase=1), dict.fromkeys(range(C), 3))
    verdict = bad.verdict(REFERENCE)
    assert verdict is not None and verdict.draws is not None
    [seq] = verdict.draws.sequences()
    assert (seq.phase, seq.rank, seq.position) == (1, 0, 0)
    # the trainer resumed inside step 1, whose second half is now lane 0's next batch
    assert verdict.draws.trainer_steps() == [TrainerStepDivergence(1, 0, 1, ids(1, 1), ids(0, 2))]


def test_launches_past_a_relaid_mid_window_resume_are_not_judged() -> None:
    last = reorder(rank(0, [0, 1, 2, 3], range(2, 4)), [1, 0])
    verdict = resumed_on_one_rank(last, exact=False).verdict(REFERENCE)
    assert verdict is not None and verdict.draws is not None
    assert verdict.draws.ok and verdict.draws.ranks_compared == 2


def test_one_rank_per_dp_group_is_judged_its_peers_are_the_dp_group_oracles() -> None:
    """The last launch is one DP group of two TP ranks; peer 1 draws out of order."""
    peers = [rank(r, [0, 1, 2, 3], range(2, 4), tp=2) for r in range(2)]
    reorder(peers[1], [1, 0])
    track = resumed_on_one_rank(peers[0])
    track = Resume(kept=track.kept[:-1], expected=dict.fromkeys(range(C), 2))
    track = track.kept_with(PhaseRecords(2, peers, None, 2, 1), dict.fromkeys(range(C), 4))
    verdict = track.verdict(REFERENCE)
    assert verdict is not None and verdict.draws is not None
    assert verdict.ok and verdict.draws.ranks_compared == 3


def _moved_then_resumed(again: RankRecord) -> Resume:
    """G 2 -> 1 on a boundary, where the one rank starts its new turn at lane 2 (Zephon's to
    choose: no turn was saved for lanes 0-3) and checkpoints after one draw; then G 1 -> 1
    resumes that checkpoint: ``again`` is that launch's rank."""
    before = [rank(0, [0, 1], range(2)), rank(1, [2, 3], range(2))]
    track = Resume().kept_with(PhaseRecords(2, before, 1, phase=0), dict.fromkeys(range(C), 2))
    moved = RankRecord(0, lanes=[0, 1, 2, 3], batches=[Batch(0, 2, ids(2, 2), 0)])
    track = track.kept_with(PhaseRecords(1, [moved], 1, phase=1), {0: 2, 1: 2, 2: 3, 3: 2})
    return track.kept_with(PhaseRecords(1, [again], None, phase=2), dict.fromkeys(range(C), 4))


def test_a_turn_moved_in_one_launch_goes_on_from_where_it_stopped_in_the_next() -> None:
    """Zephon saves the turn's position with the checkpoint: the resumed rank goes on at lane
    3, after the lane 2 it drew last, not at the first lane (a false finding once)."""
    order = [(3, 2), (0, 2), (1, 2), (2, 3), (3, 3), (0, 3), (1, 3)]
    again = RankRecord(
        0,
        lanes=[0, 1, 2, 3],
        batches=[Batch(n, ln, ids(ln, s), 0) for n, (ln, s) in enumerate(order)],
    )
    verdict = _moved_then_resumed(again).verdict(REFERENCE)
    assert verdict is not None and verdict.ok, verdict.describe()
    restarted = RankRecord(
        0,
        lanes=[0, 1, 2, 3],
        batches=[
            Batch(n, ln, ids(ln, s), 0)
            for n, (ln, s) in enumerate(sorted(order, key=lambda x: (x[1], x[0])))
        ],
    )
    verdict = _moved_then_resumed(restarted).verdict(REFERENCE)
    assert verdict is not None and not verdict.ok
    assert any(p.kind is ProblemKind.RANK_SEQUENCE_DIVERGED for p in verdict.problems), (
        verdict.describe()
    )
