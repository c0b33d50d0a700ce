"""``checkpoint-after-restore-skips-round``: a checkpoint taken right after a restore
runs no round, so it cannot warn of a mid-window position."""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect, run_of
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome


def _checkpoint_before_first_batch(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A restored launch checkpoints before its first batch and no rank warns mid-window."""
    if not problem.is_(Area.CHECKPOINT, ProblemKind.NO_WARNING):
        return False
    run = run_of(outcome, problem)
    if run is None or not run.spec.restore_from:
        return False
    index = problem.checkpoint
    events = [ev for rec in run.records for ev in rec.checkpoints if ev.index == index]
    return bool(events) and all(ev.after_batches == 0 for ev in events)


CHECKPOINT_AFTER_RESTORE = KnownDefect(
    id="checkpoint-after-restore-skips-round",
    summary=(
        "pipe.checkpoint() between pipe.restore() and the first batch is not collective: it "
        "returns the restored checkpoint unchanged, so a mid-window position does not warn and "
        "the result names the old world size"
    ),
    evidence=(
        "zephon 0.2.0 _internal/pipeline.py Pipeline.checkpoint: `if self._pending_restore is "
        "not None: return dict(self._pending_restore)` (2025-2026) runs before any engine "
        "exists, so Engine._check_mid_window_counts (engine.py 1662: a lone rank's state_dict, "
        "a group's merge) never sees the unequal lane counts; minimal scenario: G 1 -> 1, C=2, "
        "checkpoint 0+1 then a checkpoint at step 0 of the restored launch: no 'Checkpoint "
        "taken mid-window' warning on any rank, while the same position checkpointed after a "
        "batch warns. Standalone: tests/zephon/repro/mid_window_warnings.py"
    ),
    explains=_checkpoint_before_first_batch,
)
