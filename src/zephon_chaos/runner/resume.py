"""What the launches so far hand on to the next: kept batches, lane counts, the
checkpoint to restore; and a launch torchrun restarted, judged and kept up to its restore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zephon_chaos.faults.leftover_round import LeftoverRound
from zephon_chaos.launch import GroupResult
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles.global_batches import (
    PhaseRecords,
    Verdict,
    assemble,
    compare,
    draws,
    lane_streams,
)
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner.outcome import PhaseRun, ResumeFact, ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.workload.records import RankRecord, read_phase, read_rank
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
        """``records`` kept, and each lane's count of delivered batches moved to ``delivered``;
        the records learn where they start and end, and whether their draws are judged."""
        expected = {**self.expected, **delivered}
        judged = replace(records, start=dict(self.expected), end=expected, exact=self.exact)
        return replace(self, kept=(*self.kept, judged), expected=expected)

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
        """The kept batches against the uninterrupted ``reference`` (None: nothing kept): each
        lane's stream, and each rank's draws where Zephon promises the reference's exactly.
        ``clip``: expect no lane past the reference's end (a run that ran dry)."""
        if not self.kept:
            return None
        ref_streams = lane_streams(reference)
        expected = {
            lane: min(n, len(ref_streams.get(lane, []))) if clip else n
            for lane, n in self.expected.items()
        }
        verdict = compare(ref_streams, assemble(list(self.kept)), expected, exact=self.exact)
        verdict.add_draws(draws(ref_streams, list(self.kept), clip=clip))
        return verdict


@dataclass(frozen=True)
class Restarted:
    """A launch torchrun restarted, seen after it: the attempt judged as the launch (its
    folder and spec), what the launches so far hand on, what that attempt met of the dead
    attempts' rounds, and, where torchrun restarted it too, why it failed (the launch ends
    there: its batches after the failure are another attempt's)."""

    out: Path
    spec: WorkloadSpec
    track: Resume
    met: LeftoverRound | None = None
    failed: Problem | None = None


def met_round(out: Path) -> LeftoverRound | None:
    """The round a restarted attempt's rank 0 found open in its namespace, as it recorded
    before its leader could announce one (``faults.restart.met_round``); None: none."""
    from zephon_chaos.faults.restart import MET_ROUND

    rec = read_rank(out, 0)
    met = next((ev for ev in rec.events if ev.get("kind") == MET_ROUND), None)
    if met is None or met.get("round") is None:
        return None
    return LeftoverRound(str(met["namespace"]), str(met["round"]), bool(met.get("failed")))


def restarted_attempt(
    scenario: Scenario,
    i: int,
    spec: WorkloadSpec,
    result: GroupResult,
    track: Resume,
    outcome: ScenarioOutcome,
    rounds: Any = None,
) -> Restarted | None:
    """Judge each attempt of a launch torchrun restarted that its rank fault ended, keep its
    batches up to the checkpoint the next attempt resumed, and return the attempt its fault
    spared, to be judged as the launch (None: a round-point fault that left its attempt to
    complete, a ``raise`` a retry policy survived, so the launch is judged as one unrestarted).

    Each faulted attempt's fault must have fired (a round-point fault, ``rounds``, is judged
    on that attempt's records: ``RoundFaultLaunch.judge``), its checkpoints due before the
    fault completed, and every rank of the next attempt must have restored the latest
    checkpoint an earlier attempt persisted (``faults.restart.latest_checkpoint``), read from
    the files, not predicted: a crash inside round k leaves checkpoint k persisted or not
    depending on how far the leader got.
    """
    from zephon_chaos.faults.restart import attempt_dir, latest_checkpoint, restored_from

    phase, out = scenario.launches[i], Path(spec.out_dir)
    c = scenario.canonical_replicas(i)
    where = f"phase {i}"
    suffix = spec.checkpoint_path(0).suffix.lstrip(".")
    faulted = max((f.until_attempt or 1 for f in phase.rank_faults), default=1)
    numbers = (p.name.removeprefix("restart") for p in out.glob("restart*"))
    attempts = [0, *sorted(int(n) for n in numbers if n.isdigit())]

    def restart(kind: ProblemKind, text: str, checkpoint: int | None = None) -> None:
        outcome.problems.append(Problem(Area.RESTART, kind, text, phase=i, checkpoint=checkpoint))

    if attempts == [0] and rounds is not None and result.ok:
        return None
    here, later = out, spec
    for attempt in range(faulted):
        here = attempt_dir(out, attempt)
        records = track.cumulative(read_phase(here, phase.world_size))
        attempt_spec = replace(spec, out_dir=str(here), restore_from=later.restore_from)
        run = PhaseRun(i, phase, attempt_spec, result, records, ckpt_oracle.check(records, c))
        if rounds is not None:
            outcome.problems.extend(rounds.judge(run, attempt=attempt))
        elif not any(ev.get("kind") == "fault" for rec in records for ev in rec.events):
            restart(
                ProblemKind.FAULT_NEVER_FIRED,
                f"{where}: attempt {attempt}'s rank fault never fired",
            )
        if attempt + 1 not in attempts:
            restart(
                ProblemKind.NO_RESTART,
                f"{where}: torchrun did not restart attempt {attempt}: {result.summary()}",
            )
            return Restarted(here, later, track)
        # A round-point fault's judge holds the checkpoints before its round to account.
        facts = run.checkpoints.facts
        lost = [] if rounds is not None else ckpt_oracle.lost(facts, _due(scenario, i))
        if lost:
            restart(
                ProblemKind.LOST_CHECKPOINT,
                f"{where}: checkpoint {lost[0]} of attempt {attempt}, due before the fault, did "
                "not complete",
                lost[0],
            )
            return Restarted(here, later, track)
        persisted = latest_checkpoint(out, attempt + 1, suffix)
        restore = str(persisted) if persisted is not None else spec.restore_from
        if persisted is not None and persisted.parent == here:
            index = int(persisted.stem.split("-")[1])
            if not any(f.index == index for f in run.checkpoints.facts):
                restart(
                    ProblemKind.WRONG_RESTORE,
                    f"{where}: attempt {attempt} persisted checkpoint {index} ({persisted}) but "
                    "no rank recorded taking it",
                    index,
                )
                return Restarted(here, later, track)
            track, fact = track.resumed(i, phase.world_size)
            if fact is not None:
                outcome.resumes.append(fact)
            track = track.keep(run, index)
        nxt = attempt_dir(out, attempt + 1)
        later = replace(spec, out_dir=str(nxt), restore_from=restore)
        restored = restored_from(nxt, phase.world_size)
        if restored != {restore}:
            restart(
                ProblemKind.WRONG_RESTORE,
                f"{where}: attempt {attempt + 1} restored {sorted(map(str, restored))}, not the "
                f"latest checkpoint an earlier attempt persisted ({restore})",
            )
    here = attempt_dir(out, faulted)
    met = met_round(here)
    failed = None
    if attempts[-1] > faulted:
        errors = [str((r.error or {}).get("error", "")) for r in read_phase(here, phase.world_size)]
        failed = Problem(
            Area.LAUNCH,
            ProblemKind.FAILED,
            f"{where}: attempt {faulted}, which its fault spared, failed and torchrun restarted "
            f"it ({attempts[-1] - faulted} more attempt(s)): "
            + ("; ".join(e for e in errors if e) or "no rank recorded an error"),
            phase=i,
        )
    return Restarted(here, later, track, met, failed)


def _due(scenario: Scenario, i: int) -> int:
    """How many of launch ``i``'s checkpoints fall before its first step fault."""
    kept = scenario.restart_kept(i)
    if kept is None:
        return 0
    marks = sorted({(cp.step, cp.extra) for cp in scenario.launches[i].checkpoints})
    return marks.index((kept.step, kept.extra)) + 1
