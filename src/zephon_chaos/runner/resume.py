"""What the launches so far hand on to the next: kept batches, lane counts, the
checkpoint to restore; and a launch torchrun restarted, judged and kept up to its restore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from zephon_chaos.launch import GroupResult
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles.global_batches import (
    PhaseRecords,
    Verdict,
    assemble,
    compare,
    lane_streams,
)
from zephon_chaos.problem import Area, Kind, Problem
from zephon_chaos.runner.outcome import PhaseRun, ResumeFact, ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.workload.records import RankRecord, read_phase
from zephon_chaos.workload.spec import WorkloadSpec


@dataclass(frozen=True)
class Resume:
    """What the launches so far hand on to the next: the batches kept, per lane the batches
    delivered up to the checkpoint restored next (since the start), that checkpoint, and
    whether the comparison stays exact. A value: each step returns the next one."""

    kept: tuple[PhaseRecords, ...] = ()
    expected: Mapping[int, int] = field(default_factory=dict)
    restore_from: str | None = None
    taken_at: int | None = None
    taken_tp: int = 1
    taken_mid_window: bool = False
    exact: bool = True

    def cumulative(self, records: list[RankRecord]) -> list[RankRecord]:
        """Lane counts of checkpoints since the run's start (Zephon's view), not the launch's."""
        for rec in records:
            for ev in rec.checkpoints:
                ev.lane_counts = {
                    lane: self.expected.get(lane, 0) + n for lane, n in ev.lane_counts.items()
                }
        return records

    def resumed(self, phase: int, world_size: int, tp: int = 1) -> tuple[Resume, ResumeFact | None]:
        """Launch ``phase`` restored the checkpoint handed on (if any): the fact, and whether
        the comparison stays exact (a mid-window resume onto other DP groups does not)."""
        if self.restore_from is None or self.taken_at is None:
            return self, None
        fact = ResumeFact(
            phase, self.taken_at, world_size, self.taken_mid_window, self.taken_tp, tp
        )
        if fact.mid_window and fact.relaid:  # same DP groups: each keeps its lanes' order
            return replace(self, exact=False), fact
        return self, fact

    def kept_with(self, records: PhaseRecords, delivered: Mapping[int, int]) -> Resume:
        """``records`` kept, and each lane's count of delivered batches moved to ``delivered``."""
        return replace(self, kept=(*self.kept, records), expected={**self.expected, **delivered})

    def keep(self, run: PhaseRun, index: int) -> Resume:
        """``run`` kept up to its checkpoint ``index``, which the next launch restores."""
        facts = next(f for f in run.checkpoints.facts if f.index == index)
        kept = PhaseRecords(run.phase.world_size, run.records, index + 1, run.phase.tp, run.index)
        return replace(
            self.kept_with(kept, facts.lane_counts),
            restore_from=str(run.spec.checkpoint_path(index)),
            taken_at=run.phase.world_size,
            taken_tp=run.phase.tp,
            taken_mid_window=facts.mid_window,
        )

    def keep_all(self, run: PhaseRun, lanes: range, reference: list[RankRecord]) -> Resume:
        """The last phase: everything; each lane ``steps`` more, or all of it if both ran dry."""
        kept = PhaseRecords(run.phase.world_size, run.records, None, run.phase.tp, run.index)
        dry = all(r.exhausted_after is not None for r in run.records + reference)
        ref_lengths = {lane: len(b) for lane, b in lane_streams(reference).items()}
        delivered = {
            lane: ref_lengths.get(lane, 0) if dry else self.expected.get(lane, 0) + run.phase.steps
            for lane in lanes
        }
        return self.kept_with(kept, delivered)

    def verdict(self, reference: list[RankRecord], *, clip: bool = True) -> Verdict | None:
        """The kept batches against the uninterrupted ``reference`` (None: nothing kept).
        ``clip``: expect no lane past the reference's end (a run that ran dry)."""
        if not self.kept:
            return None
        ref_streams = lane_streams(reference)
        expected = {
            lane: min(n, len(ref_streams.get(lane, []))) if clip else n
            for lane, n in self.expected.items()
        }
        return compare(ref_streams, assemble(list(self.kept)), expected, exact=self.exact)


def restarted_attempt(
    scenario: Scenario,
    i: int,
    spec: WorkloadSpec,
    result: GroupResult,
    track: Resume,
    outcome: ScenarioOutcome,
) -> tuple[Path, WorkloadSpec, Resume]:
    """Judge attempt 0 of a launch torchrun restarted and keep its batches up to the
    checkpoint attempt 1 resumed; return the folder and spec of the last attempt, and what
    the launches so far hand on.

    Attempt 0's rank fault must have fired, its checkpoints before the fault completed and
    persisted (``faults.restart.latest_checkpoint`` is what attempt 1 restores), and every
    rank of attempt 1 must have restored that one.
    """
    from zephon_chaos.faults.restart import attempt_dir, restored_from

    phase, out = scenario.phases[i], Path(spec.out_dir)
    c = scenario.canonical_replicas(i)
    records = track.cumulative(read_phase(out, phase.world_size))
    run0 = PhaseRun(i, phase, spec, result, records, ckpt_oracle.check(records, c))
    where = f"phase {i}"

    def restart(kind: Kind, text: str, checkpoint: int | None = None) -> None:
        outcome.problems.append(Problem(Area.RESTART, kind, text, phase=i, checkpoint=checkpoint))

    if not any(ev.get("kind") == "fault" for rec in records for ev in rec.events):
        restart(Kind.FAULT_NEVER_FIRED, f"{where}: attempt 0's rank fault never fired")
    attempts = sorted(
        int(p.name.removeprefix("restart"))
        for p in out.glob("restart*")
        if p.name.removeprefix("restart").isdigit()
    )
    if not attempts:
        restart(Kind.NO_RESTART, f"{where}: torchrun restarted no worker: {result.summary()}")
        return out, spec, track
    kept = scenario.restart_kept(i)
    marks = sorted({(cp.step, cp.extra) for cp in phase.checkpoints})
    index = None if kept is None else marks.index((kept.step, kept.extra))
    expected_restore = spec.restore_from
    if index is not None:
        lost = ckpt_oracle.lost(run0.checkpoints.facts, index + 1)
        if lost:
            restart(
                Kind.LOST_CHECKPOINT,
                f"{where}: checkpoint {lost[0]} of attempt 0, due before the fault, did not "
                "complete",
                lost[0],
            )
            return out, spec, track
        track, fact = track.resumed(i, phase.world_size)
        if fact is not None:
            outcome.resumes.append(fact)
        track = track.keep(run0, index)
        expected_restore = str(spec.checkpoint_path(index))
    last = attempts[-1]
    later = replace(spec, out_dir=str(attempt_dir(out, last)), restore_from=expected_restore)
    restored = restored_from(attempt_dir(out, last), phase.world_size)
    if restored != {expected_restore}:
        restart(
            Kind.WRONG_RESTORE,
            f"{where}: attempt {last} restored {sorted(map(str, restored))}, not the latest "
            f"checkpoint attempt 0 persisted ({expected_restore})"
        )
    return attempt_dir(out, last), later, track
