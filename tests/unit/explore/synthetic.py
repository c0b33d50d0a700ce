"""Synthetic outcomes of the scenario runner, for the timeline's model and its drawing.

Each is what the runner would keep for a launch: rank records (on one monotonic clock from
``CLOCK``), the group's exit statuses, and the verdicts; nothing is launched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles.global_batches import PhaseRecords, assemble, compare
from zephon_chaos.oracles.liveness_model import (
    LivenessBounds,
    LivenessKind,
    LivenessProblem,
    LivenessVerdict,
    Step,
)
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import PhaseRun, ScenarioOutcome
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import Batch, CheckpointEvent, RankRecord, SampleId
from zephon_chaos.workload.spec import (
    CheckpointAt,
    ChildFault,
    PipelineSpec,
    RankFault,
    WorkloadSpec,
)

T = 5.0
"""``aggregate_timeout_s`` of every synthetic launch."""
CLOCK = 100.0
"""The monotonic time each synthetic launch's ranks begin at."""
TIMED_OUT = "RuntimeError: Timed out after 5.0s waiting for round id"
HUNG_S = 20.0
"""How long rank 1's failed checkpoint blocked in :func:`failed_checkpoint`."""


def rank(
    r: int,
    lanes: list[int],
    batches: Sequence[tuple[int, int, list[SampleId]]] = (),
    checkpoints: Sequence[CheckpointEvent] = (),
    events: Sequence[dict[str, Any]] = (),
) -> RankRecord:
    """A rank's records; ``batches`` as (lane, checkpoints before it, ids), 0.1 s apart."""
    rec = RankRecord(r, world_size=2, lanes=lanes)
    rec.events = [{"kind": "began", "at": CLOCK}, *events]
    rec.batches = [
        Batch(i, lane, ids, before, fetch_at=CLOCK + 0.1 * (i + 1), fetch_s=0.01)
        for i, (lane, before, ids) in enumerate(batches)
    ]
    rec.checkpoints = list(checkpoints)
    return rec


def checkpoint(
    index: int, start: float, seconds: float, error: str | None = None
) -> CheckpointEvent:
    return CheckpointEvent(
        index, 2, error is None, error=error, started_at=start, ended_at=start + seconds
    )


def exited(r: int, code: int | None, error: str | None = None, **kw: Any) -> RankOutcome:
    return RankOutcome(r, r, 0, 1000 + r, code, error=error, **kw)


def launch(
    tmp_path: Path,
    index: int,
    phase: Launch,
    records: list[RankRecord],
    ranks: list[RankOutcome],
    *,
    timed_out: bool = False,
    restore_from: str | None = None,
) -> PhaseRun:
    out = tmp_path / f"phase{index}"
    spec = WorkloadSpec(
        pipeline=PipelineSpec(aggregate_timeout_s=T, canonical_replicas=2),
        steps=phase.steps,
        checkpoints=phase.checkpoints,
        out_dir=str(out),
        restore_from=restore_from,
    )
    failed = [o for o in ranks if o.exitcode not in (0, -15) and not o.killed_by_harness]
    ok = not failed and not timed_out
    result = GroupResult(
        f"g{index}", [0 if ok else 1], ranks, timed_out, 1.0, out, [], failed[0] if failed else None
    )
    return PhaseRun(index, phase, spec, result, records, ckpt_oracle.check(records, 2))


def scenario(*phases: Launch) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=T), launches=phases
    )


def failed_checkpoint(tmp_path: Path) -> ScenarioOutcome:
    """Two ranks: checkpoint 0 completes, checkpoint 1 fails on both by its budget; rank 1's
    call blocks ``HUNG_S``, which the liveness verdict finds over its bound."""
    phase = Launch(2, 4, (CheckpointAt(1), CheckpointAt(2)))
    error = {"kind": "error", "error": "RuntimeError: checkpoint 1 failed", "at": CLOCK + 21}
    records = [
        rank(r, [r], checkpoints=[
            checkpoint(0, CLOCK + 0.2, 0.05),
            checkpoint(1, CLOCK + 0.4, T + 0.2 if r == 0 else HUNG_S, TIMED_OUT),
        ], events=[error])
        for r in (0, 1)
    ]  # fmt: skip
    ranks = [exited(r, 1, "RuntimeError: checkpoint 1 failed") for r in (0, 1)]
    run = launch(tmp_path, 0, phase, records, ranks)
    over = LivenessProblem(LivenessKind.UNBOUNDED_WAIT, 0, Step.CHECKPOINT, 1, 1, HUNG_S, 18.0)
    run.liveness = LivenessVerdict(0, T, LivenessBounds(), problems=[over])
    failed = Problem(Area.CHECKPOINT, ProblemKind.FAILED, "checkpoint 1 failed", 0, 1, 0)
    return ScenarioOutcome(scenario(phase), None, [run], problems=[failed, over.problem()])


def sigkill(tmp_path: Path) -> ScenarioOutcome:
    """Rank 1 kills itself (SIGKILL) at step 2 as scheduled; its agent stops rank 0; rank 0's
    child fault at step 3 never fires."""
    phase = Launch(
        2, 4, (CheckpointAt(1),), rank_faults=(RankFault(1, 2, "sigkill"),),
        child_faults=(ChildFault(0, 3),),
    )  # fmt: skip
    fired = {"kind": "fault", "rank": 1, "at_step": 2, "action": "sigkill", "at": CLOCK + 0.5}
    records = [rank(0, [0], [(0, 0, [(0, 0, 0)])]), rank(1, [1], events=[fired])]
    ranks = [exited(0, -15), exited(1, -9, self_signal="sigkill")]
    return ScenarioOutcome(scenario(phase), None, [launch(tmp_path, 0, phase, records, ranks)])


def hung(tmp_path: Path) -> ScenarioOutcome:
    """A launch that passed its deadline: the harness killed both ranks."""
    phase = Launch(2, 4)
    records = [rank(r, [r], [(r, 0, [(0, r, 0)])]) for r in (0, 1)]
    ranks = [exited(r, -9, killed_by_harness=True) for r in (0, 1)]
    run = launch(tmp_path, 0, phase, records, ranks, timed_out=True)
    return ScenarioOutcome(scenario(phase), None, [run])


def retried(tmp_path: Path) -> ScenarioOutcome:
    """Rank 0 under lockstep: its first call succeeds, but the agreement says another rank's
    failed, so it is discarded; its second call completes. Rank 1 under skip fails its only
    call and trains past it."""
    phase = Launch(2, 4, (CheckpointAt(1),), retry="lockstep")

    def call(attempt: int, ok: bool, error: str | None = None) -> dict[str, Any]:
        start = CLOCK + attempt
        return {"kind": "checkpoint_attempt", "index": 0, "attempt": attempt, "ok": ok,
                "error": error, "started_at": start, "ended_at": start + 0.5}  # fmt: skip

    agreement = {"kind": "checkpoint_agreement", "index": 0, "attempt": 1, "all_ok": False}
    records = [
        rank(0, [0], checkpoints=[checkpoint(0, CLOCK + 1, 1.5)],
             events=[call(1, True), agreement, call(2, True)]),
        rank(1, [1], checkpoints=[CheckpointEvent(0, 2, False, error=TIMED_OUT, skipped=True)],
             events=[call(1, False, TIMED_OUT)]),
    ]  # fmt: skip
    run = launch(tmp_path, 0, phase, records, [exited(0, 0), exited(1, 0)])
    return ScenarioOutcome(scenario(phase), None, [run])


def ids(lane: int, step: int) -> list[SampleId]:
    return [(0, lane, step)]


def batch_violation(tmp_path: Path) -> ScenarioOutcome:
    """Two launches of two ranks, one lane each; the second restores the first's checkpoint
    0 (taken after step 1) and lane 0 delivers step 1's sample again instead of step 2's."""
    first = Launch(2, 3, (CheckpointAt(2),))
    second = Launch(2, 2)
    l0 = [
        rank(r, [r], [(r, 0, ids(r, 0)), (r, 0, ids(r, 1)), (r, 1, ids(r, 2))],
             checkpoints=[checkpoint(0, CLOCK + 0.25, 0.01)])
        for r in (0, 1)
    ]  # fmt: skip
    l1 = [
        rank(0, [0], [(0, 0, ids(0, 1)), (0, 0, ids(0, 3))]),
        rank(1, [1], [(1, 0, ids(1, 2)), (1, 0, ids(1, 3))]),
    ]
    ok = [exited(0, 0), exited(1, 0)]
    run0 = launch(tmp_path, 0, first, l0, ok)
    restore = str(run0.spec.checkpoint_path(0))
    run1 = launch(tmp_path, 1, second, l1, ok, restore_from=restore)
    kept = (PhaseRecords(2, l0, 1, 1, 0), PhaseRecords(2, l1, None, 1, 1))
    reference = {lane: [ids(lane, s) for s in range(4)] for lane in (0, 1)}
    verdict = compare(reference, assemble(list(kept)), {0: 4, 1: 4}, exact=True)
    outcome = ScenarioOutcome(scenario(first, second), None, [run0, run1], verdict=verdict)
    outcome.kept = kept
    return outcome
