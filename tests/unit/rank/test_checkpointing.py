"""A free-running rank that retries alone beside a lag (``WorkloadSpec.draws_past_failures``):
after its last failed attempt it records the checkpoint and draws on; what it got it keeps a
copy of, to be judged by resuming it. Without a lag, ``independent`` still raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.rank.scripted_pipe import ScriptedPipe
from zephon_chaos.rank.checkpointing import take_checkpoint
from zephon_chaos.rank.hooks import RankHooks
from zephon_chaos.workload.records import RecordWriter, read_rank
from zephon_chaos.workload.spec import RankLag, WorkloadSpec

CKPT = {"progress": {"1": 1}, "version": 2}


def Pipe(*outcomes: bool) -> ScriptedPipe:
    return ScriptedPipe(CKPT, "Timed out after 2.0s waiting for round id", *outcomes)


def spec(tmp_path: Path, lagged: bool = True, persist: str = "pickle") -> WorkloadSpec:
    lags = (RankLag(1, by=1),) if lagged else ()
    return WorkloadSpec(
        out_dir=str(tmp_path),
        retry="independent",
        lags=lags,
        persist_format=persist,  # type: ignore[arg-type]
    )


def take(s: WorkloadSpec, pipe: ScriptedPipe, rank: int = 1) -> None:
    out = RecordWriter(s.out_dir, rank)
    try:
        take_checkpoint(pipe, s, rank, 0, 2, {rank: 2}, out, RankHooks())
    finally:
        out.close()


def test_a_rank_that_retried_alone_beside_a_lag_gives_the_checkpoint_up(tmp_path: Path) -> None:
    s = spec(tmp_path)
    assert s.draws_past_failures
    take(s, Pipe(False, False))
    [event] = read_rank(tmp_path, 1).checkpoints
    assert (event.ok, event.skipped) == (False, True)
    assert not s.rank_checkpoint_path(0, 1).exists()


def test_without_a_lag_independent_retry_still_raises(tmp_path: Path) -> None:
    s = spec(tmp_path, lagged=False)
    assert not s.draws_past_failures
    with pytest.raises(RuntimeError, match="failed after 2 attempt"):
        take(s, Pipe(False, False))


def test_a_follower_keeps_its_own_copy_of_what_it_got(tmp_path: Path) -> None:
    s = spec(tmp_path)
    take(s, Pipe(False, True))
    path = s.rank_checkpoint_path(0, 1)
    assert path.exists() and path != s.checkpoint_path(0)
    assert not s.checkpoint_path(0).exists()  # rank 0's own file is rank 0's to write


def test_a_collective_format_keeps_no_rank_copy() -> None:
    assert not spec(Path("."), persist="dcp").keeps_own_copy
