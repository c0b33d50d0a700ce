"""Which process writes a checkpoint round's keys, under runner ``process`` or ``mtp_mode``?

The evidence behind ``docs/space.md`` on ``runner: process`` (the round runs in the rank, so
faults inside it are allowed there) and its rows on ``NoRound.MTP_MODE``: two rank processes
(world 2, C=2) aggregate through a local TCPStore wrapped in the harness's interposer
(``chaos://``), draw three batches and checkpoint once; each rank prints its pid, what drawing
and checkpointing gave (ok, or the error), and the pids and round points of the writes its
interposer saw.

Usage: PYTHONPATH=src python scripts/round_writer_probe.py {inline|process|mtp}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

RANK_DEADLINE_S = 300.0
MODES = ("inline", "process", "mtp")


def rank_main(rank: int, port: int, out: Path, mode: str) -> None:
    from zephon_chaos.faults.interposer import InterposerPlan, interpose_uri
    from zephon_chaos.workload.data import build_pipeline
    from zephon_chaos.workload.spec import DataSpec, PipelineSpec

    events = out / f"rank{rank}.jsonl"
    uri = interpose_uri(f"torch://127.0.0.1:{port}", InterposerPlan(rank=rank, events_file=events))
    spec = PipelineSpec(
        runner="process" if mode == "process" else "inline",
        mtp_mode=mode == "mtp",
        canonical_replicas=2,
    )
    pipe = build_pipeline(DataSpec(), spec, world_size=2, rank=rank, aggregate_store=uri)
    batches = iter(pipe)
    error = ""
    try:
        for _ in range(3):
            next(batches)
        pipe.checkpoint()
    except Exception as exc:  # the probe reports what Zephon or the interposer raised
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1]}"
    finally:
        batches.close()  # ends the pipeline's workers or MTP child
    seen = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    print(
        json.dumps(
            {
                "rank": rank,
                "pid": os.getpid(),
                "outcome": error or "ok",
                "writer_pids": sorted({e["pid"] for e in seen if e.get("phase")}),
                "points": sorted({e["phase"] for e in seen if e.get("phase")}),
            }
        ),
        flush=True,
    )


def main(mode: str) -> int:
    from torch.distributed import TCPStore

    store = TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60)
    )
    with tempfile.TemporaryDirectory(prefix="round-writer-") as out:
        argv = [sys.executable, __file__, "--rank"]
        ranks = [subprocess.Popen([*argv, str(r), str(store.port), out, mode]) for r in range(2)]
        try:
            codes = [p.wait(timeout=RANK_DEADLINE_S) for p in ranks]
        finally:
            for p in ranks:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return max(codes)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rank"]:
        rank_main(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) == 2 and sys.argv[1] in MODES:
        raise SystemExit(main(sys.argv[1]))
    else:
        raise SystemExit(f"usage: {sys.argv[0]} {{{'|'.join(MODES)}}}")
