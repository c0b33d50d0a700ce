"""DP x TP layouts on real torchrun groups, as the downstream runs Zephon.

The adapter passes ``dp_degree`` (the DP size) and ``dp_group_id`` (the DP rank); ranks of one
TP group read the same data, and every world rank takes part in each checkpoint round. Across
resumes that change DP with TP fixed, both, and TP with DP fixed, the global batches must
equal an uninterrupted run's, and each DP group's ranks must consume identical batches.
"""

from __future__ import annotations

import pytest

from zephon_chaos.dimensions.cells import Dim, LayoutChange
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.lanes import lanes_of
from zephon_chaos.oracles.dp_groups import divergences
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

pytestmark = pytest.mark.cpu

C = 4
TRAJECTORY = (Launch(4, 2, (CheckpointAt(1),), tp=2), Launch(2, 2, (CheckpointAt(1),), tp=2))
"""2 x 2 (4 ranks), then 1 x 2: DP changes, TP fixed."""
MORE = (Launch(2, 2, (CheckpointAt(1),)), Launch(4, 2, tp=2))
"""Then 2 x 1 (DP and TP change), then 2 x 2 (TP changes, DP fixed)."""


def test_dp_x_tp_resumes_keep_global_batches_and_each_groups_batches_identical(
    resume_check,
) -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=C), launches=TRAJECTORY + MORE, name="dp-x-tp"
    ).validate()
    changes = {c.value[0] for c in cells_of(scenario, None) if c.dim is Dim.LAYOUT_CHANGE}
    assert changes == {change.value for change in LayoutChange}
    outcome = resume_check(scenario)
    assert outcome.ok, outcome.report()
    assert outcome.verdict is not None
    assert outcome.verdict.contract == "identical global batches"
    assert outcome.verdict.steps_compared == 1 + 1 + 1 + 2
    for run in outcome.phases:
        ph = run.phase
        assert divergences(run.records, ph.tp) == []
        for rec in run.records:
            owned = lanes_of(rec.rank, ph.world_size, C, "contiguous", ph.tp)
            assert rec.tp == ph.tp and rec.lanes == owned
            assert rec.batches and {b.lane for b in rec.batches} == set(owned)
            peer = run.records[rec.rank - rec.rank % ph.tp]  # the group's first rank
            assert [(b.lane, b.ids) for b in rec.batches] == [
                (b.lane, b.ids) for b in peer.batches
            ]
        for facts in run.checkpoints.facts:  # every rank of every DP group took part
            assert sorted(facts.ok_ranks) == list(range(ph.world_size))
            assert len(set(facts.digests.values())) == 1
