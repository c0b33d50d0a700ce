"""A tiny gloo rank program: all-reduce the ranks, report, then misbehave when asked to.

ALLREDUCE_MISBEHAVE=<rank>:<how> with how in exit3 | raise | sigkill | hang. The other ranks
then meet it in a barrier (and fail on its closed connection), or, with ALLREDUCE_BYSTANDER=wait,
block outside any collective until their agent stops them; with ALLREDUCE_BYSTANDER=torn they
first leave their torchelastic error file empty, as a rank stopped inside ``@record`` would.
ALLREDUCE_STOP_IN_PLACE_WRITES=1: a rank dies (SIGKILL) the instant anything opens its error
file to write it in place, leaving it empty: what the agent's SIGTERM does to a rank caught
inside such a write, made certain instead of a matter of timing.
"""

import json
import os
import signal
import sys

import torch
import torch.distributed as dist

from zephon_chaos.workload.error_file import record


def _stop_in_place_error_file_writes() -> None:
    """Die leaving the error file empty when it is opened for writing under its own name (an
    atomic writer opens a temporary and renames it over the file: that is never caught)."""
    path = os.path.abspath(os.environ["TORCHELASTIC_ERROR_FILE"])
    writes = os.O_WRONLY | os.O_RDWR
    caught: list[str] = []

    def hook(event: str, args: tuple) -> None:
        if event != "open" or caught or not isinstance(args[0], (str, os.PathLike)):
            return
        if os.path.abspath(args[0]) == path and args[2] & writes:
            caught.append(path)
            with open(path, "wb"):  # what the in-place write's own open leaves: an empty file
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


@record
def main() -> None:
    if os.environ.get("ALLREDUCE_STOP_IN_PLACE_WRITES") == "1":
        _stop_in_place_error_file_writes()
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
    bystander = os.environ.get("ALLREDUCE_BYSTANDER", "barrier")
    if who and bystander == "torn":
        if who != str(rank):  # caught inside @record's write, as a rank stopped there would be
            open(os.environ["TORCHELASTIC_ERROR_FILE"], "w").close()
        dist.barrier()  # the file is torn before the misbehaving rank fails
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
    elif who and bystander in ("wait", "torn"):
        while True:
            signal.pause()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
