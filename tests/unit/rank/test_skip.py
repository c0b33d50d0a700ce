"""The workload's ``skip`` policy with a fake pipeline: a failed checkpoint is recorded and
skipped (never raised, never persisted), and the first call's end is signalled once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.rank.scripted_pipe import ScriptedPipe
from zephon_chaos.rank.checkpointing import take_checkpoint
from zephon_chaos.rank.hooks import RankHooks
from zephon_chaos.workload.records import RecordWriter, read_rank
from zephon_chaos.workload.spec import WorkloadSpec

CKPT = {"progress": {"0": 1}, "version": 2}


def Pipe(*outcomes: bool) -> ScriptedPipe:
    return ScriptedPipe(CKPT, "Timed out after 2.0s waiting for checkpoint shards", *outcomes)


def take(tmp_path: Path, retry: str, pipe: ScriptedPipe, everyone_ok: bool = True) -> list[int]:
    spec = WorkloadSpec(out_dir=str(tmp_path), retry=retry)  # type: ignore[arg-type]
    ended: list[int] = []
    hooks = RankHooks(agree=lambda ok: ok and everyone_ok, call_ended=ended.append)
    out = RecordWriter(tmp_path, 0)
    try:
        take_checkpoint(pipe, spec, 0, 3, 4, {0: 4}, out, hooks)
    finally:
        out.close()
    return ended


def test_under_skip_a_failed_checkpoint_is_recorded_and_the_rank_goes_on(tmp_path: Path) -> None:
    assert take(tmp_path, "skip", Pipe(False)) == [3]
    [event] = read_rank(tmp_path, 0).checkpoints
    assert (event.index, event.ok) == (3, False) and "Timed out" in (event.error or "")
    assert not WorkloadSpec(out_dir=str(tmp_path)).checkpoint_path(3).exists()


def test_under_skip_a_checkpoint_another_rank_lacks_is_not_persisted(tmp_path: Path) -> None:
    take(tmp_path, "skip", Pipe(True), everyone_ok=False)
    rec = read_rank(tmp_path, 0)
    assert [(c.index, c.ok) for c in rec.checkpoints] == [(3, False)]
    assert "failed on another rank" in (rec.checkpoints[0].error or "")
    agreements = [e for e in rec.events if e["kind"] == "checkpoint_agreement"]
    assert [e["all_ok"] for e in agreements] == [False]
    assert not WorkloadSpec(out_dir=str(tmp_path)).checkpoint_path(3).exists()


def test_under_skip_an_agreed_checkpoint_is_persisted(tmp_path: Path) -> None:
    take(tmp_path, "skip", Pipe(True))
    assert [c.ok for c in read_rank(tmp_path, 0).checkpoints] == [True]
    assert WorkloadSpec(out_dir=str(tmp_path)).checkpoint_path(3).exists()


def test_without_a_policy_a_failed_checkpoint_raises_after_signalling(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="Timed out"):
        take(tmp_path, "none", Pipe(False))


def test_a_lockstep_retry_signals_the_first_calls_end_only(tmp_path: Path) -> None:
    assert take(tmp_path, "lockstep", Pipe(False, True)) == [3]
    assert [c.ok for c in read_rank(tmp_path, 0).checkpoints] == [True]
