"""The runner's side of a known hang: the quiet period's default, and the watch it hands a
launch (armed by any signature's trigger, recognising the first whose frames match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.diagnostics.frames import ThreadStack
from zephon_chaos.oracles.faults import failure_bound_s
from zephon_chaos.runner.hangs import (
    WORKER_START_S,
    HangSignature,
    LaunchContext,
    hang_watch,
    quiet_period_s,
)
from zephon_chaos.scenario import Launch

DUMP = """\
Thread 0x80 (idle): "MainThread"
    spin (/x/app.py:7)
    <module> (/x/app.py:20)
"""


@pytest.mark.parametrize("workers", [False, True])
def test_the_quiet_period_outlasts_a_checkpoint_call_within_its_liveness_bound(
    workers: bool,
) -> None:
    """Longer than the liveness oracle's bound of one call (a healthy rank writes a record
    after every call), and a replacement worker's start where there are workers."""
    quiet = quiet_period_s(30.0, workers)
    assert quiet > failure_bound_s(30.0) + (WORKER_START_S if workers else 0.0)
    assert quiet < 3 * 120.0  # below a process-runner launch's deadline at T = 30 s
    assert quiet_period_s(180.0, workers) > 3 * 120.0  # T = 180 s: the deadline stands


def _frame_named(name: str) -> HangSignature:
    def stuck(thread: ThreadStack) -> bool:
        return any(f.func == name for f in thread.frames)

    return HangSignature(triggered=lambda context: context.phase.world_size == 2, stuck=stuck)


def test_the_watch_recognises_the_first_signature_whose_trigger_fired_and_frames_match(
    tmp_path: Path,
) -> None:
    signatures = {"other": _frame_named("elsewhere"), "spinning": _frame_named("spin")}
    watch = hang_watch(signatures, LaunchContext(Launch(2, 4), tmp_path), quiet_s=42.0)
    assert watch.armed() and watch.quiet_s == 42.0 and watch.watched == (tmp_path,)
    assert watch.recognise({"rank 0 (pid 1)": DUMP}) == "spinning"
    assert watch.recognise({"rank 0 (pid 1)": DUMP.replace("spin", "walk")}) is None


def test_the_watch_is_not_armed_before_a_trigger_fired(tmp_path: Path) -> None:
    watch = hang_watch(
        {"spinning": _frame_named("spin")}, LaunchContext(Launch(1, 4), tmp_path), 1.0
    )
    assert not watch.armed()
    assert watch.recognise({"rank 0 (pid 1)": DUMP}) is None
