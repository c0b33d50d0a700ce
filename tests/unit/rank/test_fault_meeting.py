"""Every rank meets at a faulted step before the fault fires, so the checkpoints scheduled
before it were persisted and recorded: rank 0 walks on only after both."""

from __future__ import annotations

import threading
from pathlib import Path

from zephon_chaos.rank.hooks import RankHooks
from zephon_chaos.rank.hooks import fire as fire_fault
from zephon_chaos.rank.main import run_rank
from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.spec import (
    CheckpointAt,
    PipelineSpec,
    RankFault,
    WorkloadSpec,
)

JOIN_S = 60.0


def test_the_fault_fires_after_every_rank_met_past_the_checkpoint_before_it(
    tmp_path: Path,
) -> None:
    spec = WorkloadSpec(
        pipeline=PipelineSpec(canonical_replicas=2, aggregation="dir", aggregate_timeout_s=5.0),
        steps=3,
        checkpoints=(CheckpointAt(1),),
        out_dir=str(tmp_path / "out"),
        aggregate_dir=str(tmp_path / "agg"),
        faults=(RankFault(1, 2, "raise"),),
    )
    meeting = threading.Barrier(2, timeout=JOIN_S)
    seen: list[tuple[str, int, int]] = []
    errors: dict[int, str] = {}

    def met(rank: int, step: int) -> None:
        seen.append(("met", rank, step))
        meeting.wait()

    def fire(fault: RankFault, rank: int, out: RecordWriter) -> None:
        # Rank 0 met this step after persisting checkpoint 0, which is on disk by now.
        assert spec.checkpoint_path(0).exists()
        seen.append(("fired", rank, fault.at_step))
        fire_fault(fault, rank, out)

    def rank_thread(rank: int) -> None:
        hooks = RankHooks(before_fault=lambda step: met(rank, step), fire=fire)
        try:
            run_rank(spec, rank, 2, default_store="torch://", hooks=hooks)
        except Exception as exc:
            errors[rank] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=rank_thread, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads)
    assert sorted(seen[:2]) == [("met", 0, 2), ("met", 1, 2)]
    assert seen[2:] == [("fired", 1, 2)]
    assert "scheduled fault" in errors[1] and 0 not in errors
