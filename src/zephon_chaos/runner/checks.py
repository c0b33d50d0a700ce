"""The runner's own checks of a launch: it failed, a refusal, a crash as scheduled."""

from __future__ import annotations

from pathlib import Path

from zephon_chaos.harness_problem import HarnessGap, HarnessProblem, undescribed_failure
from zephon_chaos.launch import GroupResult
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner.outcome import PhaseRun
from zephon_chaos.scenario import Launch
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, WORKERS_RECORD, RankRecord
from zephon_chaos.workload.spec import ALL_WORKERS


def failed_launch(area: Area, result: GroupResult, phase: int | None = None) -> Problem:
    """A launch (``area``: a scenario's, or the reference run) that failed and should not
    have; its kind is ``timeout``, the first failure's error type, or ``failed``."""
    first = result.first_failure
    kind: str = ProblemKind.TIMEOUT if result.timed_out else ProblemKind.FAILED
    if not result.timed_out and first is not None and first.error_type:
        kind = first.error_type
    what = "the reference run" if phase is None else f"phase {phase}"
    return Problem(
        area,
        kind,
        f"{what} failed: {result.summary()}",
        phase=phase,
        rank=None if first is None else first.rank,
    )


def group_never_formed(
    what: str, result: GroupResult, records: list[RankRecord]
) -> HarnessProblem | None:
    """The harness problem of a launch that passed its deadline before every rank began its
    loop (``RankRecord.began``), if it is one: it tested nothing, and judging its hang would
    blame the code under test for torch's rendezvous or the harness's set-up."""
    waiting = [r.rank for r in records if not r.began]
    if not result.timed_out or not waiting:
        return None
    return HarnessProblem(
        HarnessGap.GROUP_NEVER_FORMED,
        f"{what} passed its deadline before rank(s) {waiting} began (still joining the "
        f"process group or setting up; no code under test ran there): {result.summary()}",
    )


def expected_failure_problems(
    index: int, phase: Launch, result: GroupResult
) -> tuple[list[Problem], list[HarnessProblem]]:
    """A phase meant to be refused must fail, and with the error it names: (problems of the
    code under test, failures the harness could not describe, which judge nothing)."""
    if result.ok:
        text = f"phase {index} was expected to fail but succeeded"
        return [Problem(Area.REFUSAL, ProblemKind.ACCEPTED, text, phase=index)], []
    if result.timed_out:
        text = f"phase {index} was expected to fail with an error but hung until its deadline"
        return [Problem(Area.REFUSAL, ProblemKind.HANG, text, phase=index)], []
    if not phase.expect_error:
        return [], []
    undescribed = undescribed_failure(f"phase {index}", result)
    if undescribed is not None:
        return [], [undescribed]
    first = result.first_failure
    assert first is not None  # undescribed_failure names a launch without one
    if phase.expect_error not in (first.error or ""):
        text = (
            f"phase {index} failed, but not with {phase.expect_error!r}: "
            f"first failure: rank {first.rank}: {first.error or first.status}"
        )
        return [
            Problem(Area.REFUSAL, ProblemKind.WRONG_ERROR, text, phase=index, rank=first.rank)
        ], []
    return [], []


def child_fault_gaps(run: PhaseRun) -> list[HarnessProblem]:
    """Each child fault of a completed launch must have fired and killed a worker: else the
    harness did not do what the scenario says, which judges nothing of Zephon."""
    if not run.result.ok:
        return []
    fired = {
        (rec.rank, ev.get("at_step")): ev.get("killed") or []
        for rec in run.records
        for ev in rec.events
        if ev.get("kind") == CHILD_FAULT_RECORD
    }
    alive = {
        rec.rank: set(ev.get("pids") or ())
        for rec in run.records
        for ev in rec.events
        if ev.get("kind") == WORKERS_RECORD
    }
    gaps = []
    for f in run.phase.child_faults:
        killed = fired.get((f.rank, f.at_step))
        if not killed:
            what = "left no record" if killed is None else "found no worker process to kill"
        elif (
            f.target == ALL_WORKERS
            and f.at_step < run.phase.steps
            and not alive.get(f.rank, set()) - set(killed)
        ):
            # With every worker gone and ``CHILD_TAIL_ROWS`` drawn after, the rank needs
            # replacements. One killed worker of several may go unreplaced to the end: the
            # others serve the tail while the watchdog's poll comes round.
            what = "was never answered by a replacement worker: the batches drawn after it "
            what += "came from buffers, so the launch tested nothing of the respawn"
        else:
            continue
        detail = f"phase {run.index}: the child fault {f} {what}"
        gaps.append(HarnessProblem(HarnessGap.CHILD_FAULT_MISSED, detail))
    return gaps


def crash_problems(run: PhaseRun, index: int | None, canonical_replicas: int) -> list[Problem]:
    """A phase with rank faults must end by its fault, after the checkpoints due before it."""
    i, result = run.index, run.result
    fired = [ev for rec in run.records for ev in rec.events if ev.get("kind") == "fault"]

    def crash(kind: ProblemKind, text: str, checkpoint: int | None = None) -> Problem:
        return Problem(Area.CRASH, kind, text, phase=i, checkpoint=checkpoint)

    if result.ok:
        return [
            crash(
                ProblemKind.NO_END,
                f"phase {i} was to end by its scheduled rank fault(s) "
                f"{list(run.phase.rank_faults)}, but the launch succeeded",
            )
        ]
    if not fired:
        text = f"phase {i} failed before its scheduled fault fired: {result.summary()}"
        return [crash(ProblemKind.EARLY_FAILURE, text)]
    if index is None:
        return []
    facts = {f.index: f for f in run.checkpoints.facts}
    problems = []
    for j in range(index + 1):
        f = facts.get(j)
        where = f"phase {i}: checkpoint {j}, "
        if f is None or not f.completed:
            text = f"{where}due before the fault, did not complete"
            problems.append(crash(ProblemKind.LOST_CHECKPOINT, text, j))
        elif j < index and len(f.ok_ranks) != len(run.records):
            text = f"{where}before the fault, lacks some rank's record"
            problems.append(crash(ProblemKind.CHECKPOINT, text, j))
        elif len(set(f.digests.values())) > 1:
            text = f"{where}before the fault, differs between ranks: {f.digests}"
            problems.append(crash(ProblemKind.CHECKPOINT, text, j))
        elif any(c != list(range(canonical_replicas)) for c in f.covered.values()):
            text = f"{where}before the fault, does not cover all lanes: {f.covered}"
            problems.append(crash(ProblemKind.CHECKPOINT, text, j))
    if not problems and not Path(run.spec.checkpoint_path(index)).exists():  # dcp: a folder
        text = f"phase {i}: rank 0 persisted no checkpoint {index} before the fault"
        problems.append(crash(ProblemKind.LOST_CHECKPOINT, text, index))
    return problems


def judged_by_resuming(phase: Launch) -> bool:
    """Whether ``phase``'s ranks may get different merged checkpoints, each judged by resuming
    it: ``independent`` retry beside a lag (free-running ranks that retry alone)."""
    return phase.retry == "independent" and bool(phase.lags)
