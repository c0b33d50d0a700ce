"""Known defects of Zephon: what the explorer found, with evidence, pinned by strict xfails.

Each defect explains some problem lines of an outcome. The suite's properties judge only
the problems no known defect explains (a known defect must not turn CI red), while a strict
xfail in ``tests/zephon/test_properties.py`` runs the defect's minimal scenario, so CI alerts
when Zephon fixes it. The explorer still reports them, as ``known.<id>`` findings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from zephon_chaos.runner import ScenarioOutcome

_NO_WARNING = re.compile(r"^phase (?P<phase>\d+): checkpoint (?P<index>\d+) was taken mid-window")


@dataclass(frozen=True)
class KnownDefect:
    id: str
    summary: str
    evidence: str
    explains: Callable[[ScenarioOutcome, str], bool]


def _checkpoint_before_first_batch(outcome: ScenarioOutcome, problem: str) -> bool:
    """A restored launch checkpoints before its first batch and no rank warns mid-window."""
    m = _NO_WARNING.match(problem)
    if m is None:
        return False
    phase, index = int(m["phase"]), int(m["index"])
    run = next((r for r in outcome.phases if r.index == phase), None)
    if run is None or not run.spec.restore_from:
        return False
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
        "not None: return dict(self._pending_restore)` runs before any aggregation round, so "
        "Engine._check_mid_window_counts (engine.py, called from the merge) never sees the "
        "unequal lane counts; minimal scenario: G 1 -> 1, C=2, checkpoint 0+1 then a "
        "checkpoint at step 0 of the restored launch: no 'Checkpoint taken mid-window' warning "
        "on any rank, while the same position checkpointed after a batch warns"
    ),
    explains=_checkpoint_before_first_batch,
)


def _mtp_checkpoint(outcome: ScenarioOutcome, problem: str) -> bool:
    """In ``mtp_mode`` no rank of the calling processes sees the mid-window warning."""
    return outcome.scenario.pipeline.mtp_mode and _NO_WARNING.match(problem) is not None


MTP_WARNING_STAYS_IN_CHILD = KnownDefect(
    id="mtp-mid-window-warning-stays-in-child",
    summary=(
        "with mtp_mode=True, a mid-window pipe.checkpoint() warns only inside the MTP child "
        "process (text on its stderr): the process that called checkpoint() gets no warning, "
        "so warning filters, pytest's capture and logging.captureWarnings never see it"
    ),
    evidence=(
        "zephon 0.2.0 _internal/mtp.py _handle_ctrl_msg: on _CHECKPOINT the child runs "
        "engine.state_dict() (the round whose merge calls Engine._check_mid_window_counts) and "
        "sends back only the state; the RuntimeWarning is printed by the child, attributed to "
        "mtp.py:407. Minimal case: world_size=1, C=2, mtp_mode=True, one batch, then "
        "checkpoint(): lane_emitted {0: 1, 1: 0}, warnings caught in the caller: none; the "
        "same with mtp_mode=False warns in the caller. Found by the torchrun-tier property"
    ),
    explains=_mtp_checkpoint,
)

KNOWN_DEFECTS: tuple[KnownDefect, ...] = (CHECKPOINT_AFTER_RESTORE, MTP_WARNING_STAYS_IN_CHILD)


def explaining(outcome: ScenarioOutcome) -> list[KnownDefect]:
    """The known defects that explain at least one problem of ``outcome``."""
    return [d for d in KNOWN_DEFECTS if any(d.explains(outcome, p) for p in outcome.problems)]


def unexplained(outcome: ScenarioOutcome) -> list[str]:
    """Problem lines no known defect explains."""
    return [p for p in outcome.problems if not any(d.explains(outcome, p) for d in KNOWN_DEFECTS)]


def judged_ok(outcome: ScenarioOutcome) -> bool:
    """Passes once known defects are set aside: what the suite's properties assert (a
    failure the harness could not describe never passes)."""
    return (
        not unexplained(outcome)
        and not outcome.harness_problems
        and (outcome.verdict is None or outcome.verdict.ok)
    )
