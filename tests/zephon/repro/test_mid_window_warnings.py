"""Zephon's known defects ``checkpoint-after-restore-skips-round`` and
``mtp-mid-window-warning-stays-in-child``, shown by a standalone script.

``mid_window_warnings.py`` (torch and zephon only) takes a mid-window checkpoint on one rank
and checks who is warned: the checkpoint itself (control), the same checkpoint taken again by
a pipeline that restored it, before (defect) and after (control) its first batches, and the
same position with ``mtp_mode`` (defect). Each defect is a strict xfail asserting the warning,
so CI turns red when Zephon fixes it; a control that does not warn fails outright.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import reported, run_script
from zephon_chaos.explore.known import CHECKPOINT_AFTER_RESTORE, MTP_WARNING_STAYS_IN_CHILD

SCRIPT = Path(__file__).with_name("mid_window_warnings.py")
CASES = ["fresh", "after-restore", "after-restore-and-batches", "mtp"]
DEADLINE_S = 120.0
"""5 s measured a run (importing torch, one MTP child)."""


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    work = tmp_path_factory.mktemp("mid-window")
    return reported(run_script(SCRIPT, work, DEADLINE_S), "case", CASES, SCRIPT)


def _mid_window(case: dict[str, Any]) -> bool:
    return len(set(case["lane_emitted"].values())) > 1


def test_the_controls_warn_their_caller(cases: dict[str, dict[str, Any]]) -> None:
    for name in ("fresh", "after-restore-and-batches"):
        assert _mid_window(cases[name]) and cases[name]["warned"], cases[name]
    assert cases["after-restore-and-batches"]["unchanged"] is False, cases


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=f"known Zephon defect {CHECKPOINT_AFTER_RESTORE.id}: "
    f"{CHECKPOINT_AFTER_RESTORE.evidence}",
)
def test_a_checkpoint_right_after_restore_warns(cases: dict[str, dict[str, Any]]) -> None:
    case = cases["after-restore"]
    if not _mid_window(case):  # pytest.fail is no AssertionError: outside the xfail's reach
        pytest.fail(f"the restored position is not mid-window: {case}")
    assert case["warned"] and not case["unchanged"], case


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=f"known Zephon defect {MTP_WARNING_STAYS_IN_CHILD.id}: "
    f"{MTP_WARNING_STAYS_IN_CHILD.evidence}",
)
def test_a_mid_window_checkpoint_in_mtp_mode_warns_its_caller(
    cases: dict[str, dict[str, Any]],
) -> None:
    case = cases["mtp"]
    if case["lane_emitted"] != cases["fresh"]["lane_emitted"]:
        pytest.fail(f"mtp_mode drew another position than the control: {cases}")
    assert case["warned"], case
