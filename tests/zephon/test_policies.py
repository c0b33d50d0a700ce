"""Recipe failure policies and free-running ranks, on real torchrun groups (2 ranks).

* ``skip``: after a failed checkpoint every rank records the failure and trains on; the next
  scheduled checkpoint succeeds, is the one persisted, and the next launch resumes from it
  with batch identity. The failed one is on no disk.
* ``sync: free`` with a lag: a rank calls a checkpoint only once the leader's call of it has
  ended, so later than ``aggregate_timeout_s`` by construction. The round fails as Zephon
  documents (a budget per call, from each rank's own call); the policy oracle calls it late,
  not a finding, and the runner resumes from the last checkpoint every rank got.
"""

from __future__ import annotations

import pytest

from zephon_chaos.explore.known import judged_ok, unexplained
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.oracles.policies import RoundOutcome, judge
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PhaseTrigger, PipelineSpec, RankLag

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 2.0
CHECKPOINTS = (CheckpointAt(1), CheckpointAt(2), CheckpointAt(3))
MISSED_ROUND = (
    "Zephon defect: after a round a follower never joined, the next round fails with "
    "'last_round_id mismatch across shards' although every rank calls it on time "
    "(tests/zephon/repro/test_missed_round_poisons_next.py)"
)


def lagged(retry: str, checkpoints: int = 3) -> Scenario:
    """Rank 1 late for the second checkpoint (index 1) of the first launch, then a resume."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=TIMEOUT_S),
        launches=(
            Launch(
                2,
                checkpoints,
                tuple(CheckpointAt(k) for k in range(1, checkpoints + 1)),
                retry=retry,  # type: ignore[arg-type]
                sync="free",
                lags=(RankLag(1, checkpoint=1),),
            ),
            Launch(2, 2),
        ),
        name=f"lag-{retry}",
    )


def test_under_skip_a_late_round_is_skipped_and_the_next_good_one_resumed(resume_check) -> None:
    outcome = resume_check(lagged("skip", checkpoints=4))
    run = outcome.phases[0]
    assert run.result.ok, run.result.summary()
    lag = [ev for rec in run.records for ev in rec.events if ev.get("kind") == "lag"]
    assert [(ev["checkpoint"], ev["waited_for"]) for ev in lag] == [(1, 0)], lag
    assert run.policy is not None
    rounds = {r.index: r for r in run.policy.rounds}
    assert rounds[0].outcome is RoundOutcome.COMPLETED, run.policy
    assert rounds[1].outcome is RoundOutcome.LATE, run.policy
    assert rounds[1].spread_s is not None and rounds[1].spread_s >= TIMEOUT_S, rounds[1]
    assert rounds[3].outcome is RoundOutcome.COMPLETED, run.policy
    for rec in run.records:  # every rank recorded every checkpoint and trained on
        assert [c.index for c in rec.checkpoints] == [0, 1, 2, 3] and rec.ended
        assert [c.ok for c in rec.checkpoints if c.index != 2] == [True, False, True]
    assert not run.spec.checkpoint_path(1).exists(), "a skipped checkpoint was persisted"
    assert run.restore_index == 3
    assert outcome.verdict is not None and outcome.verdict.ok, outcome.report()
    # The only problem allowed is the known defect's: checkpoint 2 failing on time.
    assert all(
        p.text.startswith("phase 0: checkpoint 2: failed although") for p in outcome.problems
    )
    assert judged_ok(outcome), unexplained(outcome)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=MISSED_ROUND)
def test_under_skip_the_round_after_a_late_one_completes(resume_check) -> None:
    outcome = resume_check(lagged("skip"))
    assert outcome.ok, outcome.report()
    assert outcome.phases[0].restore_index == 2


@pytest.mark.slow
def test_without_a_policy_a_late_round_ends_the_launch_and_the_last_good_one_resumes(
    resume_check,
) -> None:
    outcome = resume_check(lagged("none"))
    assert outcome.ok, outcome.report()
    run = outcome.phases[0]
    assert not run.result.ok
    assert run.policy is not None and run.policy.failed_by_arrival, run.policy
    assert run.restore_index == 0
    assert outcome.verdict is not None and outcome.verdict.ok


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=MISSED_ROUND)
def test_a_lockstep_retry_completes_a_late_round(resume_check) -> None:
    outcome = resume_check(lagged("lockstep"))
    assert outcome.ok, outcome.report()
    run = outcome.phases[0]
    assert run.restore_index == 2
    for rec in run.records:
        assert [(c.index, c.ok) for c in rec.checkpoints] == [(0, True), (1, True), (2, True)]


def test_under_skip_a_lost_ack_fails_one_checkpoint_and_the_next_one_is_persisted(chaos) -> None:
    """A link fault (the interposer loses rank 1's second acknowledgement: a split outcome)
    fails checkpoint 1 only; under skip both ranks record it failed, neither raises, and
    checkpoint 2 is taken, agreed and persisted."""
    spec = chaos.spec(
        "skip-lost-ack",
        steps=3,
        checkpoints=CHECKPOINTS,
        timeout_s=TIMEOUT_S,
        triggers=(PhaseTrigger(1, "ack", "drop", occurrence=2),),
        retry="skip",
    )
    run = chaos.launch(spec)
    result = run.wait()
    assert result.ok, result.report()
    assert not run.survivors()
    assert [(e["phase"], e["n"]) for e in run.fired(1)] == [("ack", 2)]
    records = run.records()
    verdict = run.judge(1)
    assert verdict.outcome == fault_oracle.FAILED, verdict.describe()
    assert any("split" in e for e in verdict.evidence), verdict.evidence
    for rec in records:
        assert [(c.index, c.ok) for c in rec.checkpoints] == [(0, True), (1, False), (2, True)]
    assert not spec.checkpoint_path(1).exists() and spec.checkpoint_path(2).exists()
    policy = judge(
        records,
        phase=0,
        timeout_s=TIMEOUT_S,
        retry="skip",
        faulted=True,
        persisted=lambda i: spec.checkpoint_path(i).exists(),
    )
    assert policy.ok, policy.lines()
    assert [r.agreed for r in policy.rounds] == [True, False, True]
