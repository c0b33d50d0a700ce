"""A gloo rank program: save one checkpoint through DCP on every rank, load it back together.

Writes ``$DCP_OUT/rank<r>.json`` with whether the loaded checkpoint equals the saved one
exactly (values and types), and the saved checkpoint's repr for the harness to compare.
"""

import json
import os
from pathlib import Path

import torch.distributed as dist

from zephon_chaos.workload import persist
from zephon_chaos.workload.error_file import record

CHECKPOINT = {
    "world": {"canonical_replicas": 4, "world_size": 2},
    "progress": {0: {"chunk_id": 0, "offset": 4}, 3: {"chunk_id": 1, "offset": 0}},
    "inflight": {0: {0: {"components": [("a", [(0, 2, 19)])]}}},
    "rr_next_idx": {"0/1:0,1,2": 0},
    "none": None,
}


@record
def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(os.environ["DCP_OUT"])
    path = out / "ckpt.dcp"
    persist.save(CHECKPOINT, path, "dcp")  # collective: every rank, the same bytes
    loaded = persist.load(path, "dcp")  # collective as well
    report = {
        "rank": rank,
        "world": world,
        "loaded_exactly": repr(loaded) == repr(CHECKPOINT) and loaded == CHECKPOINT,
        "saved_repr": repr(CHECKPOINT),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
