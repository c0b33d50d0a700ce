"""The hang watch: a quiet launch whose stacks show a known hang ends there; a launch that
progresses, is not armed, or shows no known hang keeps its deadline (fake clock and progress
below; two real groups at the end)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from zephon_chaos.launch.hangwatch import HangWatch, HangWatcher, Quiet, Stacks, progress_mark

QUIET_S = 30.0
EARLY_S = 5.0
HANG_SCRIPT = Path(__file__).parents[1] / "diagnostics" / "scripts" / "hang.py"


class Launch:
    """A fake launch: its clock, what it has written, and the stack captures asked of it."""

    def __init__(self, defect: str | None = "known-hang", armed: bool = True) -> None:
        self.now = 100.0
        self.written = 0
        self.captures = 0
        self.defect = defect
        self.armed = armed
        self.write_during_capture = False

    def collect(self) -> Stacks:
        self.captures += 1
        if self.write_during_capture:
            self.written += 1
        return {"rank 0 (pid 1)": "stack"}

    def watcher(self, max_checks: int = 3, proofs: list[str | None] | None = None) -> HangWatcher:
        """``proofs``: what each early capture proves, in turn, the last for good (None: no
        proof asked)."""
        early = {} if proofs is None else {"prove": lambda s: _next(proofs), "early_s": EARLY_S}
        watch = HangWatch(
            QUIET_S, lambda stacks: self.defect, lambda: self.armed, max_checks=max_checks, **early
        )
        return HangWatcher(
            watch, lambda: self.written, self.collect, started_at=90.0, clock=lambda: self.now
        )

    def run(self, watcher: HangWatcher, seconds: float, writing: bool = False) -> object:
        """Poll once a second for ``seconds``; the first cut, or None."""
        for _ in range(int(seconds)):
            self.now += 1.0
            self.written += int(writing)
            cut = watcher.poll()
            if cut is not None:
                return cut
        return None


def _next(proofs: list[str | None]) -> str | None:
    return proofs.pop(0) if len(proofs) > 1 else proofs[0]


def test_a_quiet_armed_launch_whose_stacks_match_is_cut_after_the_quiet_period() -> None:
    launch = Launch()
    watcher = launch.watcher()
    assert launch.run(watcher, 20, writing=True) is None
    assert launch.run(watcher, QUIET_S - 1) is None, "cut before the quiet period ended"
    cut = launch.run(watcher, 2)
    assert cut is not None and launch.captures == 1
    assert cut.cut_short.defect == "known-hang"  # type: ignore[attr-defined]
    assert cut.cut_short.quiet_s == pytest.approx(QUIET_S)  # type: ignore[attr-defined]
    assert cut.cut_short.at_s == pytest.approx(launch.now - 90.0)  # type: ignore[attr-defined]
    assert cut.stacks == {"rank 0 (pid 1)": "stack"}  # type: ignore[attr-defined]


def test_a_launch_that_keeps_writing_is_never_looked_at() -> None:
    launch = Launch()
    assert launch.run(launch.watcher(), 10 * QUIET_S, writing=True) is None
    assert launch.captures == 0


def test_no_stacks_are_taken_before_the_trigger_fired() -> None:
    launch = Launch(armed=False)
    watcher = launch.watcher()
    assert launch.run(watcher, 3 * QUIET_S) is None and launch.captures == 0
    launch.armed = True
    assert launch.run(watcher, 1) is not None and launch.captures == 1


def test_no_match_is_checked_again_after_each_quiet_period_a_bounded_number_of_times() -> None:
    launch = Launch(defect=None)
    watcher = launch.watcher(max_checks=2)
    assert launch.run(watcher, QUIET_S + 1) is None and launch.captures == 1
    assert launch.run(watcher, QUIET_S - 2) is None and launch.captures == 1
    assert launch.run(watcher, 2) is None and launch.captures == 2
    assert launch.run(watcher, 10 * QUIET_S) is None and launch.captures == 2


def test_a_launch_that_writes_while_its_stacks_are_taken_is_not_cut() -> None:
    launch = Launch()
    launch.write_during_capture = True
    watcher = launch.watcher()
    assert launch.run(watcher, QUIET_S + 1) is None and launch.captures == 1
    launch.write_during_capture = False
    assert launch.run(watcher, QUIET_S - 1) is None, "checked again before a further quiet"
    assert launch.run(watcher, 2) is not None


def test_a_hang_proved_twice_in_a_row_is_cut_after_the_early_period() -> None:
    launch = Launch(defect=None)
    watcher = launch.watcher(proofs=["proved", "proved"])
    assert launch.run(watcher, EARLY_S - 1) is None and launch.captures == 0
    cut = launch.run(watcher, 2)
    assert cut is not None and launch.captures == 2, "two captures, both proving"
    assert cut.cut_short.defect == "proved"  # type: ignore[attr-defined]
    assert cut.cut_short.quiet_s == pytest.approx(EARLY_S)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "proofs", [[None], ["proved", None], ["proved", "other"]], ids=["none", "once", "two-hangs"]
)
def test_a_proof_not_repeated_is_asked_again_after_each_early_period_then_waits_the_quiet(
    proofs: list[str | None],
) -> None:
    launch = Launch()  # the full check at the quiet period recognises the hang
    watcher = launch.watcher(proofs=[*proofs, None])
    assert launch.run(watcher, EARLY_S + 1) is None
    captured = launch.captures
    assert captured == len(proofs), "a proof is taken twice"
    assert launch.run(watcher, EARLY_S - 2) is None and launch.captures == captured
    assert launch.run(watcher, 2) is None and launch.captures == captured + 1, "asked again"
    cut = launch.run(watcher, QUIET_S)
    assert cut is not None and cut.cut_short.quiet_s == pytest.approx(QUIET_S)  # type: ignore[attr-defined]


def test_a_launch_that_writes_between_its_proving_captures_is_not_cut() -> None:
    launch = Launch(defect=None)
    launch.write_during_capture = True
    watcher = launch.watcher(proofs=["proved"])
    assert launch.run(watcher, 3 * QUIET_S) is None
    assert launch.captures >= 2


def test_a_hang_watch_wants_a_proof_and_its_early_period_together() -> None:
    with pytest.raises(ValueError, match="both a proof and a positive early period"):
        HangWatch(QUIET_S, lambda stacks: None, prove=lambda stacks: None)
    with pytest.raises(ValueError, match="both a proof and a positive early period"):
        HangWatch(QUIET_S, lambda stacks: None, early_s=EARLY_S)
    with pytest.raises(ValueError, match="both a proof and a positive early period"):
        HangWatch(QUIET_S, lambda stacks: None, prove=lambda stacks: None, early_s=0.0)


def test_progress_resets_the_quiet_period() -> None:
    quiet = Quiet(QUIET_S, max_checks=3, now=0.0)
    assert not quiet.due("a", 0.0)
    assert not quiet.due("a", QUIET_S - 1)
    assert not quiet.due("b", QUIET_S)  # a write: the quiet begins again
    assert not quiet.due("b", 2 * QUIET_S - 1)
    assert quiet.due("b", 2 * QUIET_S)
    assert quiet.silent_s(2 * QUIET_S) == QUIET_S


def test_the_progress_mark_moves_with_every_write(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    empty = progress_mark([tmp_path])
    (records / "rank0.jsonl").write_text("{}\n")
    one = progress_mark([tmp_path])
    with open(records / "rank0.jsonl", "a") as f:
        f.write("{}\n")
    assert len({empty, one, progress_mark([tmp_path])}) == 3
    assert progress_mark([tmp_path / "absent"]) == (0, 0, 0)


def test_a_hang_watch_refuses_a_quiet_period_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="positive quiet period"):
        HangWatch(0.0, lambda stacks: None)


# ---- real groups: the barrier hang of diagnostics' hang script, rank 1 in a busy loop ------
def _in_barrier(stacks: Stacks) -> str | None:
    return "barrier-hang" if any("wait_in_barrier" in s for s in stacks.values()) else None


def _both_ready(ready: Path) -> bool:
    """The trigger: both ranks announced their wait (a silent start-up is no hang)."""
    return len(list(ready.iterdir())) == 2


@pytest.mark.cpu
def test_a_real_group_whose_stacks_show_the_hang_is_cut_short(
    torchrun_group, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    ready.mkdir()
    spec = torchrun_group.spec(
        HANG_SCRIPT,
        env={"HANG_HOW": "busy_loop", "HANG_READY_DIR": str(ready)},
        deadline_s=240.0,
        name="hang-cut",
    )
    watch = HangWatch(3.0, _in_barrier, lambda: _both_ready(ready), watched=(ready,))
    result = torchrun_group.spawn_spec(replace(spec, hang_watch=watch)).wait()
    assert result.timed_out and result.cut_short is not None, result.summary()
    assert result.cut_short.defect == "barrier-hang"
    assert result.duration_s < 120.0, result.summary()
    assert "cut short: known hang barrier-hang recognised after" in result.summary()
    assert any("wait_in_barrier" in s for s in result.stacks.values())


@pytest.mark.cpu
def test_a_real_group_whose_stacks_show_no_known_hang_keeps_its_deadline(
    torchrun_group, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    ready.mkdir()
    asked: list[Stacks] = []

    def nothing_known(stacks: Stacks) -> str | None:
        asked.append(stacks)
        return None

    spec = torchrun_group.spec(
        HANG_SCRIPT,
        env={"HANG_HOW": "busy_loop", "HANG_READY_DIR": str(ready)},
        deadline_s=30.0,
        name="hang-kept",
    )
    watch = HangWatch(
        3.0, nothing_known, lambda: _both_ready(ready), watched=(ready,), max_checks=2
    )
    result = torchrun_group.spawn_spec(replace(spec, hang_watch=watch)).wait()
    assert result.timed_out and result.cut_short is None
    assert result.duration_s >= 30.0
    assert len(asked) <= 2
    assert "passed its deadline" in result.summary()
