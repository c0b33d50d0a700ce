"""Free-running ranks that drift a whole checkpoint interval apart and retry alone, on a real
torchrun group (2 ranks), each merged checkpoint they got judged by resuming it.

Rank 1 calls its first checkpoint only once the leader's call of its second has ended, so
the leader fails its first checkpoint alone (both attempts), gives it up and draws on
(``WorkloadSpec.draws_past_failures``); rank 1's late call joins whichever round of the
leader's is open. Which one it finds no oracle predicts: every distinct merged checkpoint any
rank got is resumed on 2 ranks and on 1 (``runner.verify``) and must deliver the reference's
batches from where its ranks stood.
"""

from __future__ import annotations

import pytest

from zephon_chaos.problem import Area
from zephon_chaos.runner.verify import MAX_CHECKPOINTS, MAX_WORLDS
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankLag

pytestmark = [pytest.mark.cpu, pytest.mark.chaos, pytest.mark.slow]

TIMEOUT_S = 2.0


def drifted() -> Scenario:
    """One launch of 2 ranks, 3 checkpoints, rank 1 one interval behind the leader."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S),
        launches=(
            Launch(
                2,
                3,
                (CheckpointAt(1), CheckpointAt(2), CheckpointAt(3)),
                retry="independent",
                sync="free",
                lags=(RankLag(1, checkpoint=0, by=1),),
            ),
        ),
        name="drift-one-interval",
    )


def test_every_merged_checkpoint_a_drifted_rank_got_resumes_to_the_reference(
    resume_check,
) -> None:
    outcome = resume_check(drifted())
    run = outcome.phases[0]
    lag = [ev for rec in run.records for ev in rec.events if ev.get("kind") == "lag"]
    assert [(ev["checkpoint"], ev["waited_for"], ev["behind"]) for ev in lag] == [(0, 0, 1)]
    assert run.result.ok, run.result.summary()  # the ranks gave failed checkpoints up
    leader = {c.index: c.ok for c in run.records[0].checkpoints}
    assert leader[0] is False, run.records[0].checkpoints  # nobody came to its first
    digests = {c.digest for rec in run.records for c in rec.checkpoints if c.ok}
    assert digests, outcome.report()
    assert len(outcome.verifications) == min(len(digests), MAX_CHECKPOINTS) * MAX_WORLDS
    assert {v.target.world_size for v in outcome.verifications} == {2, 1}
    assert all(v.verdict is not None for v in outcome.verifications), outcome.report()
    verify = [p for p in outcome.problems if p.area is Area.VERIFY]
    assert not verify, outcome.report()
    assert outcome.verdict is not None and outcome.verdict.ok, outcome.report()
