"""Faults inside a checkpoint round on the in-process tier: each rank thread's store client
reaches the store through a proxy of its own (link faults), and its interposer raises in the
store call at a round point. Every case proves its fault acted (the proxy's counters, the
interposer's event) and gets the fault oracle's verdict; the relaunch resumes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from zephon_chaos.inproc import TierRefusal, inproc_refusal, inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.spec import CheckpointAt, DataSpec, PipelineSpec, RankFault, SourceSpec


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[InprocScenarioRunner]:
    with inproc_runner(tmp_path / "inproc") as r:
        yield r
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-s")]


@dataclass(frozen=True)
class Case:
    """One fault in the first of two launches, the verdicts it may get, its retry policy."""

    fault: ProxyFault | RankFault
    outcomes: tuple[str, ...]
    retry: str = "none"
    aggregations: tuple[str, ...] = ("store", "store_explicit")
    extra: dict[str, object] = field(default_factory=dict)

    def scenario(self, aggregation: str) -> Scenario:
        link = isinstance(self.fault, ProxyFault)
        return Scenario(
            data=DataSpec(sources=(SourceSpec("a", (20, 20)),), chunk_size=4),
            pipeline=PipelineSpec(
                canonical_replicas=2, aggregation=aggregation, aggregate_timeout_s=2.0
            ),
            launches=(
                Launch(
                    2,
                    3,
                    (CheckpointAt(1), CheckpointAt(2)),
                    proxy_faults=(self.fault,) if link else (),  # type: ignore[arg-type]
                    rank_faults=() if link else (self.fault,),  # type: ignore[arg-type]
                    retry=self.retry,  # type: ignore[arg-type]
                ),
                Launch(2, 2),
            ),
            name="inproc-fault",
        )


CASES = {
    "down-at-shard#2": Case(ProxyFault(1, "down", at="shard#2"), ("failed",), "lockstep"),
    "latency-from-start": Case(
        ProxyFault(1, "latency", attributes={"latency": 50}, at="start"), ("completed",)
    ),
    "reset-at-ack": Case(
        ProxyFault(1, "reset_peer", attributes={"timeout": 0}, at="ack"),
        ("split", "split resolved", "completed"),
        "skip",
    ),
    "raise-at-follower-shard": Case(
        RankFault(1, 0, "raise", at="shard"), ("failed",), aggregations=("store", "dir")
    ),
    # The follower's call fails at once; under skip it must agree with the leader (still
    # waiting out the round) before its next checkpoint, or it joins that round with a later
    # shard and the leader's merge refuses it (inproc.collective).
    "raise-at-follower-shard-skip": Case(
        RankFault(1, 0, "raise", at="shard"), ("failed",), "skip", aggregations=("dir", "store")
    ),
    "raise-at-leader-outcome": Case(
        RankFault(0, 0, "raise", at="outcome"),
        ("completed", "failed", "split resolved"),
        "lockstep",
        aggregations=("store_explicit", "dir"),
    ),
    "raise-at-ack#2-independent": Case(
        RankFault(1, 0, "raise", at="ack#2"),
        ("completed", "failed", "split", "split resolved"),
        "independent",
    ),
}


@pytest.mark.parametrize(
    ("name", "aggregation"),
    [
        # Each case once on its first aggregation mode; the others in the slow lane.
        pytest.param(name, agg, marks=() if i == 0 else pytest.mark.slow)
        for name, case in CASES.items()
        for i, agg in enumerate(case.aggregations)
    ],
)
def test_a_fault_inside_a_round_acts_and_is_judged(
    runner: InprocScenarioRunner, name: str, aggregation: str
) -> None:
    case = CASES[name]
    outcome = runner.run(case.scenario(aggregation))
    assert outcome.ok, outcome.report()
    faulted = outcome.phases[0].fault
    assert faulted is not None and faulted.evidence, outcome.report()
    assert faulted.verdict is not None and faulted.verdict.outcome in case.outcomes, (
        faulted.verdict
    )
    assert outcome.verdict is not None  # the relaunch resumed and its batches were compared


def test_a_stalling_link_is_refused_in_process_naming_the_field() -> None:
    """A thread blocked in the C++ store client on a stalled link ends only at the deadline."""
    stalled = Case(ProxyFault(1, "timeout", {"timeout": 0}, at="shard"), ()).scenario("store")
    reason = inproc_refusal(stalled)
    assert reason is not None and reason.startswith("scenario.launches[0].proxy_faults[0].toxic")
    assert "--tier torchrun" in reason
    assert issubclass(TierRefusal, ValueError)
