"""Two or more rank threads running the workload's rank loop, as the interposer tests need."""

from __future__ import annotations

import threading

from zephon_chaos.faults.interposer import read_events
from zephon_chaos.workload.spec import WorkloadSpec

JOIN_S = 60.0
"""A deadline for each rank thread; past it the test fails naming the stuck thread."""


def run_rank_threads(
    spec: WorkloadSpec, world: int, default_store: str = "torch://"
) -> dict[int, str]:
    """Run ``spec``'s rank loop on ``world`` threads; each failed rank's error."""
    from zephon_chaos.rank.main import run_rank

    errors: dict[int, str] = {}

    def rank_thread(rank: int) -> None:
        try:
            run_rank(spec, rank, world, default_store=default_store)
        except Exception as exc:
            errors[rank] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=rank_thread, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "a rank thread is still running"
    return errors


def phases_written(out_dir: str, rank: int) -> list[tuple[str, int]]:
    """The round phases ``rank``'s interposer saw it write, in order, with their counts."""
    return [(e["phase"], e["n"]) for e in read_events(out_dir, rank) if e["kind"] == "write"]


def assert_dropped_ack_splits(spec: WorkloadSpec, errors: dict[int, str]) -> None:
    """Rank 1's dropped ack of round 2 fired, and the leader's wait for it split the round."""
    from zephon_chaos.oracles import faults as fault_oracle
    from zephon_chaos.workload.records import read_phase

    fired = [e for e in read_events(spec.out_dir, 1) if e["kind"] == "fired"]
    assert [(e["phase"], e["n"], e["action"]) for e in fired] == [("ack", 2, "drop")]
    verdict = fault_oracle.judge(
        read_phase(spec.out_dir, 2),
        None,
        index=1,
        canonical_replicas=2,
        timeout_s=spec.pipeline.aggregate_timeout_s,
    )
    assert verdict.outcome == fault_oracle.SPLIT, verdict.describe()
    assert "acknowledgements" in errors[0]
    assert 1 not in errors
