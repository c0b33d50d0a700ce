"""Ranks of one DP group consume identical batches; each group's lanes are counted once."""

from __future__ import annotations

from zephon_chaos.oracles.dp_groups import divergences, judge, representatives
from zephon_chaos.oracles.global_batches import PhaseRecords, assemble, lane_streams
from zephon_chaos.workload.records import Batch, RankRecord


def _batches(lanes: list[int], steps: int) -> list[Batch]:
    """``steps`` global steps over ``lanes``: lane l's s-th batch holds samples (0, l, 2s+k)."""
    return [
        Batch(len(lanes) * s + j, lane, [(0, lane, 2 * s + k) for k in range(2)], 0)
        for s in range(steps)
        for j, lane in enumerate(lanes)
    ]


def _group_records(tp: int = 2, steps: int = 3, ended: bool = True) -> list[RankRecord]:
    """A 2 x ``tp`` launch over C = 4: DP group g owns lanes 2g and 2g+1 (contiguous)."""
    return [
        RankRecord(
            rank=r,
            world_size=2 * tp,
            lanes=[2 * (r // tp), 2 * (r // tp) + 1],
            tp=tp,
            batches=_batches([2 * (r // tp), 2 * (r // tp) + 1], steps),
            ended=ended,
        )
        for r in range(2 * tp)
    ]


def test_identical_groups_pass() -> None:
    assert divergences(_group_records(), tp=2) == []
    assert judge(_group_records(tp=1), tp=1).found() == []


def test_a_planted_divergence_inside_a_dp_group_is_caught_with_its_evidence() -> None:
    records = _group_records()
    planted = records[3].batches[4]  # rank 3 (DP group 1), batch 4: loses its first sample
    records[3].batches[4] = Batch(planted.index, planted.lane, planted.ids[1:], 0)
    [found] = divergences(records, tp=2)
    assert (found.group, found.leader, found.rank, found.position) == (1, 2, 3, 4)
    assert found.expected == (2, [(0, 2, 4), (0, 2, 5)])
    assert found.actual == (2, [(0, 2, 5)])
    text = judge(records, tp=2).found()[0].text
    assert text.startswith("DP group 1 diverged: rank 3's batch 4")


def test_a_peer_reading_another_lane_is_caught() -> None:
    records = _group_records()
    b = records[1].batches[0]
    records[1].batches[0] = Batch(b.index, 3, b.ids, 0)
    [found] = divergences(records, tp=2)
    assert (found.group, found.rank, found.position) == (0, 1, 0)


def test_a_peer_that_ends_short_is_caught_unless_a_fault_ended_the_launch() -> None:
    records = _group_records()
    del records[1].batches[-1]
    [found] = divergences(records, tp=2)
    assert (found.rank, found.position, found.actual) == (1, 5, None)
    crashed = _group_records(ended=False)
    del crashed[1].batches[-2:]  # a fault stopped rank 1 early: its prefix still agrees
    assert divergences(crashed, tp=2) == []


def test_each_dp_group_is_read_once_by_the_global_batch_oracle() -> None:
    records = _group_records()
    assert [r.rank for r in representatives(records, tp=2)] == [0, 2]
    streams = lane_streams(records, tp=2)
    assert {lane: len(b) for lane, b in streams.items()} == {0: 3, 1: 3, 2: 3, 3: 3}
    doubled = lane_streams(records)  # read as if every rank owned its own lanes
    assert {lane: len(b) for lane, b in doubled.items()} == {0: 6, 1: 6, 2: 6, 3: 6}
    kept = assemble([PhaseRecords(4, records, None, tp=2), PhaseRecords(1, records[:1], None)])
    assert {lane: len(b) for lane, b in kept.items()} == {0: 6, 1: 6, 2: 3, 3: 3}
