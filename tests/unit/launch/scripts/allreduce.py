"""A tiny gloo rank program: all-reduce the ranks, report, then misbehave when asked to.

ALLREDUCE_MISBEHAVE=<rank>:<how> with how in exit3 | sigkill | hang.
"""

import json
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank)])
    dist.all_reduce(value)
    out = os.environ.get("ALLREDUCE_OUT")
    if out:
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"rank": rank, "world": world, "sum": value.item()}, f)
    print(f"rank {rank}/{world}: sum={value.item()}", flush=True)
    who, _, how = os.environ.get("ALLREDUCE_MISBEHAVE", ":").partition(":")
    if who == str(rank):
        if how == "exit3":
            print(f"rank {rank} exits 3 on purpose", file=sys.stderr, flush=True)
            os._exit(3)  # sys.exit would abort in gloo's destructor with a peer waiting
        if how == "raise":
            raise RuntimeError(f"rank {rank} fails on purpose")
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "hang":
            print(f"rank {rank} hangs on purpose", flush=True)
            while True:
                signal.pause()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
