"""A link fault that heals at the end of its round, on the in-process tier: the rank removes
it itself once its ``checkpoint()`` call has returned (``ProxyFault.until``), and the heal
oracle (``oracles.healing``) holds the next call to completing on every rank.

A reset and a cut at a follower's first shard write, healed, are followed by a lockstep retry
that completes. A cut at a follower's first ack is not judged by the retry: the ack awaits no
reply, so no operation of the follower failed before the heal and its retry's first operation
meets the connection the cut ended. After a cut at the leader's first announcement the retry
does not complete: the announcement is lost while the leader keeps its round id, and the retry
is refused (the known defect ``healed-link-poisons-retry``, which explains that problem and
only where its heal happened).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.explore.known import HEALED_LINK_POISONS_RETRY, judged_ok, unexplained
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.oracles.healing import HealOutcome, Unjudged
from zephon_chaos.problem import Area, ProblemKind
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.records import LINK_HEALED_RECORD
from zephon_chaos.workload.spec import ROUND_END, CheckpointAt, DataSpec, PipelineSpec, SourceSpec


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[InprocScenarioRunner]:
    with inproc_runner(tmp_path / "inproc") as r:
        yield r
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-s")]


def healed(fault: ProxyFault) -> Scenario:
    """Two ranks, two checkpoints, the lockstep retry policy; a relaunch resumes."""
    return Scenario(
        data=DataSpec(sources=(SourceSpec("a", (20, 20)),), chunk_size=4),
        pipeline=PipelineSpec(canonical_replicas=2, aggregation="store", aggregate_timeout_s=2.0),
        launches=(
            Launch(
                2, 3, (CheckpointAt(1), CheckpointAt(2)), proxy_faults=(fault,), retry="lockstep"
            ),
            Launch(2, 2),
        ),
        name="healed-link",
    )


def heals(outcome: ScenarioOutcome) -> list[dict[str, object]]:
    """The ``link_healed`` records of the faulted launch."""
    run = outcome.phases[0]
    return [ev for rec in run.records for ev in rec.events if ev["kind"] == LINK_HEALED_RECORD]


@pytest.mark.parametrize(
    "fault",
    [
        ProxyFault(1, "reset_peer", {"timeout": 0}, at="shard#1", until=ROUND_END),
        ProxyFault(1, "down", at="shard#1", until=ROUND_END),
    ],
    ids=["reset_peer", "down"],
)
def test_after_a_healed_fault_at_a_followers_shard_the_next_call_completes(
    runner: InprocScenarioRunner, fault: ProxyFault
) -> None:
    outcome = runner.run(healed(fault))
    assert outcome.ok, outcome.report()
    (heal,) = heals(outcome)
    assert (heal["rank"], heal["index"], heal["attempt"], heal["phase"]) == (1, 0, 1, "shard")
    launch = outcome.phases[0].fault
    assert launch is not None and launch.healing is not None, outcome.report()
    assert launch.healing.outcome is HealOutcome.RECOVERED, launch.healing
    assert "checkpoint 0 attempt 2" in launch.healing.evidence[0]
    assert outcome.verdict is not None and outcome.verdict.ok


def test_after_a_healed_cut_at_a_followers_ack_the_retry_is_not_promised(
    runner: InprocScenarioRunner,
) -> None:
    """Zephon's client reconnects after a failed operation and does not retry that one
    (``TorchKVStore``): with two attempts no call follows the one the retry failed in."""
    outcome = runner.run(healed(ProxyFault(1, "down", at="ack#1", until=ROUND_END)))
    (heal,) = heals(outcome)
    assert (heal["rank"], heal["phase"], heal["failure_seen"]) == (1, "ack", False)
    launch = outcome.phases[0].fault
    assert launch is not None and launch.healing is not None, outcome.report()
    assert launch.healing.outcome is HealOutcome.UNJUDGED, launch.healing
    assert Unjudged.DEAD_CONNECTION.value in launch.healing.evidence[0]
    assert not [
        p for p in outcome.problems if p.is_(Area.FAULT, ProblemKind.NO_RECOVERY_AFTER_HEAL)
    ]


@pytest.mark.zephon_defect("missed-round-poisons-next")
def test_a_healed_cut_at_the_leaders_announcement_is_the_known_defect(
    runner: InprocScenarioRunner,
) -> None:
    """The problem is typed, and set aside only by the defect whose trigger this launch had."""
    outcome = runner.run(healed(ProxyFault(0, "down", at="announce", until=ROUND_END)))
    found = [p for p in outcome.problems if p.is_(Area.FAULT, ProblemKind.NO_RECOVERY_AFTER_HEAL)]
    assert found, outcome.report()
    assert all(HEALED_LINK_POISONS_RETRY.explains(outcome, p) for p in found)
    assert judged_ok(outcome), unexplained(outcome)
