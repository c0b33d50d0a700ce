"""A rank that dies inside a checkpoint round, and torchrun's own restart after it.

With ``--max-restarts`` the agent starts every worker again within seconds: the restarted
attempt meets the agent's store (which survives the restart) with the dead attempt's keys in
it, the same run id, and for ``aggregate_dir`` the same directory. A crash in round 1 leaves
nothing persisted, so the restarted attempt restores what attempt 0 restored and works in its
namespace, next to its dead round. Each test proves the fault fired in attempt 0 only, that
the restarted attempt's leader found attempt 0's dead round open where the aggregation keeps
it (its ``met_round`` record, read before it could announce one of its own), and that the
scenario ran to a verdict: judged ok, or Zephon's documented limitation
``dead-round-meets-relaunch`` on its trigger (a rank's own error naming the dead round).
"""

from __future__ import annotations

import pytest

from zephon_chaos.explore import known
from zephon_chaos.faults.interposer import read_events
from zephon_chaos.faults.restart import MET_ROUND
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import read_rank
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankFault

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

TIMEOUT_S = 4.0
CPS = (CheckpointAt(1), CheckpointAt(2))
WHERE_KEPT = {"store": "torchrun's agent store", "store_explicit": "hosted", "dir": "dir"}


def crashed_in_round(aggregation: str) -> Scenario:
    """Two ranks; the follower SIGKILLed before its first shard write, one restart allowed."""
    fault = RankFault(1, 0, "sigkill", restart=0, at="shard")
    return Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2,
            aggregation=aggregation,  # type: ignore[arg-type]
            aggregate_timeout_s=TIMEOUT_S,
        ),
        launches=(Launch(2, 3, CPS, rank_faults=(fault,), max_restarts=1), Launch(2, 2)),
        name=f"restart-in-round-{aggregation}",
    ).validate()


@pytest.mark.parametrize(
    "aggregation",
    ["store", pytest.param("store_explicit", marks=pytest.mark.slow), "dir"],
)
def test_a_crash_inside_round_one_meets_the_restart_with_its_dead_round(
    resume_check, aggregation: str
) -> None:
    outcome = resume_check(crashed_in_round(aggregation))
    restarted = outcome.phases[0]
    assert restarted.spec.out_dir.endswith("restart1"), outcome.report()
    attempt0 = restarted.spec.out_dir.removesuffix("/restart1")
    fired = [e for e in read_events(attempt0, 1) if e.get("kind") == "fired"]
    assert [e.get("phase") for e in fired] == ["shard"], fired
    assert not read_events(restarted.spec.out_dir, 1), "the fault fired again after the restart"
    met = [e for e in read_rank(restarted.spec.out_dir, 0).events if e.get("kind") == MET_ROUND]
    assert len(met) == 1 and "error" not in met[0], met
    assert met[0]["where"] == aggregation
    # The restarted attempt met attempt 0's dead round in the very place attempt 0 wrote it.
    dead = restarted.met_round
    assert dead is not None, f"attempt 1 met no open round: {met}"
    assert dead.round_id in str(fired[0].get("key")), (dead, fired)
    assert not known.unexplained(outcome), outcome.report()
    assert not outcome.harness_problems, outcome.report()
    if outcome.problems:  # the relaunch's follower joined the dead round: the limitation
        explaining = {d.id for d in known.explaining(outcome)}
        assert explaining <= {"dead-round-meets-relaunch", "failed-round-open-in-dir"}
        assert any(
            d.kind is known.KnownKind.LIMITATION for d in known.explaining(outcome)
        ), outcome.report()
    else:
        assert outcome.verdict is not None and outcome.verdict.ok, outcome.report()
