"""What running a scenario gives: each launch's run, the resumes, the problems, the verdict."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zephon_chaos.faults.leftover_round import LeftoverRound
from zephon_chaos.harness_problem import HarnessProblem
from zephon_chaos.launch import GroupResult
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles import liveness as liveness_oracle
from zephon_chaos.oracles import policies as policy_oracle
from zephon_chaos.oracles.global_batches import PhaseRecords, Verdict
from zephon_chaos.problem import Problem
from zephon_chaos.runner.deadlines import Deadline
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import RankRecord
from zephon_chaos.workload.spec import WorkloadSpec


@dataclass
class PhaseRun:
    index: int
    phase: Launch
    spec: WorkloadSpec
    result: GroupResult
    records: list[RankRecord]
    checkpoints: ckpt_oracle.CheckpointVerdict
    fault: Any = None
    """A faulted launch's evidence and verdict: a link fault's
    (``nemeses.scenario_proxy.FaultedLaunch``) or a round-point rank fault's
    (``nemeses.round_faults.RoundFaultLaunch``)."""
    liveness: liveness_oracle.LivenessVerdict | None = None
    """Zephon's timing promises on this launch: measured waits, propagation, problems."""
    policy: policy_oracle.PolicyVerdict | None = None
    """What the launch's checkpoint policy promises: each round's outcome by arrival, skip's."""
    met_round: LeftoverRound | None = None
    """A round an earlier launch left open (announced, no result) in this launch's namespace,
    as the launch met it (``faults.leftover_round``): what a real relaunch meets."""
    cleared_round: bool = False
    """The scenario's operator step (``Deployment.operator``) removed ``met_round`` first."""
    held: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    """Per rank, when a toxic on its store link held data back (monotonic clock): the
    network's time, which the timing oracles do not count against Zephon."""
    deadline: Deadline | None = None
    """The deadline the launch ran under, and why it was that long (``runner.deadlines``)."""

    @property
    def restore_index(self) -> int | None:
        """Index of the checkpoint the next phase restores: the last that survived."""
        return surviving_checkpoint(self.checkpoints.facts)


def surviving_checkpoint(facts: list[ckpt_oracle.CheckpointFacts]) -> int | None:
    """The last checkpoint rank 0 completed (so persisted) that no rank saw fail.

    Rank 0 records a checkpoint as completed only after persisting it; followers may record
    one that rank 0 never finished (a fault on the leader's link at ``outcome``), and that
    one has no file to restore from. Under ``lockstep`` retry and ``skip`` the ranks agree
    before rank 0 persists, so this is the last checkpoint every rank got: under ``skip`` the
    successful one after a skipped one, never the skipped one.
    """
    done = [f.index for f in facts if f.completed]
    return max(done) if done else None


@dataclass(frozen=True)
class ResumeFact:
    phase: int
    from_world: int
    to_world: int
    mid_window: bool
    from_tp: int = 1
    to_tp: int = 1

    @property
    def resized(self) -> bool:
        return self.from_world != self.to_world

    @property
    def relaid(self) -> bool:
        """The lanes changed hands: the number of DP groups, which own them, changed."""
        return self.from_world // self.from_tp != self.to_world // self.to_tp


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    reference: PhaseRun | None
    phases: list[PhaseRun] = field(default_factory=list)
    verdict: Verdict | None = None
    kept: tuple[PhaseRecords, ...] = ()
    """What the verdict compared: each kept launch's records, up to the checkpoint the next
    restored (its global steps, in order), with the launch they are of."""
    problems: list[Problem] = field(default_factory=list)
    scenario_file: Path | None = None
    resumes: list[ResumeFact] = field(default_factory=list)
    """Every launch that restored a checkpoint: from which world size, mid-window or not."""
    harness_problems: list[HarnessProblem] = field(default_factory=list)
    """Failures the harness could not describe: its own problems, not the code under test's."""
    verifications: list[Any] = field(default_factory=list)
    """Each merged checkpoint free-running ranks got, resumed by a launch of its own
    (``runner.verify.Verification``): which, on how many ranks, and its verdict."""
    unjudged: list[tuple[int, Any]] = field(default_factory=list)
    """(launch, ``runner.verify.Unjudged``): merged checkpoints no verification resumed."""
    unformed: list[GroupResult] = field(default_factory=list)
    """Launches whose group never formed (a harness problem): nothing of them is judged, but
    their logs and stacks are the evidence a triage of the harness needs."""

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and not self.harness_problems
            and (self.verdict is None or self.verdict.ok)
        )

    def report(self) -> str:
        lines = [self.scenario.summary()]
        for run in ([self.reference] if self.reference else []) + self.phases:
            lines.append(f"  {run.result.summary().splitlines()[0]}")
            if run.result.timed_out and run.deadline is not None:
                lines.append(f"    {run.deadline.describe()}")  # why it was that long
        lines += [f"  problem: {p}" for p in self.problems]
        lines += [f"  {h.describe()}" for h in self.harness_problems]
        lines += [f"  verified: {v.describe()}" for v in self.verifications]
        lines += [
            f"  not verified: phase {i}: checkpoint {u.index} of rank {u.rank}: {u.why}"
            for i, u in self.unjudged
        ]
        if self.verdict is not None:
            lines.append(self.verdict.describe())
        if self.scenario_file is not None:
            lines.append(f"replay: zephon-chaos replay {shlex.quote(str(self.scenario_file))}")
        return "\n".join(lines)
