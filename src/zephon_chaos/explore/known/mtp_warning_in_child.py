"""``mtp-mid-window-warning-stays-in-child``: in ``mtp_mode`` the mid-window warning is
raised in the MTP child, out of the caller's reach."""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome


def _mtp_checkpoint(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """In ``mtp_mode`` no rank of the calling processes sees the mid-window warning."""
    return outcome.scenario.pipeline.mtp_mode and problem.is_(
        Area.CHECKPOINT, ProblemKind.NO_WARNING
    )


MTP_WARNING_STAYS_IN_CHILD = KnownDefect(
    id="mtp-mid-window-warning-stays-in-child",
    summary=(
        "with mtp_mode=True, a mid-window pipe.checkpoint() warns only inside the MTP child "
        "process (text on its stderr): the process that called checkpoint() gets no warning, "
        "so warning filters, pytest's capture and logging.captureWarnings never see it"
    ),
    evidence=(
        "zephon 0.2.0 _internal/mtp.py _handle_ctrl_msg (393-409): on _CHECKPOINT the child "
        "runs engine.state_dict() (which calls Engine._check_mid_window_counts) and sends back "
        "only the state; the RuntimeWarning is printed by the child, attributed to "
        "mtp.py:407. Minimal case: world_size=1, C=2, mtp_mode=True, one batch, then "
        "checkpoint(): lane_emitted {0: 1, 1: 0}, warnings caught in the caller: none; the "
        "same with mtp_mode=False warns in the caller. Found by the torchrun-tier property. "
        "Standalone: tests/zephon/repro/mid_window_warnings.py"
    ),
    explains=_mtp_checkpoint,
)
