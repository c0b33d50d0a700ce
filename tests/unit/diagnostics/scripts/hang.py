"""A 2-rank gloo program where one rank hangs on purpose and its peer waits in a barrier.

HANG_HOW = busy_loop | store_wait | sigstop; HANG_RANK (default 1) hangs; every rank writes
``<HANG_READY_DIR>/rank<R>`` just before it starts waiting, so the test waits on that event.
"""

import os
import signal
from datetime import timedelta

import torch.distributed as dist


def ready(rank: int) -> None:
    path = os.path.join(os.environ["HANG_READY_DIR"], f"rank{rank}")
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)


def busy_loop(rank: int) -> None:
    ready(rank)
    n = 0
    while True:
        n += 1


def wait_for_a_key_nobody_sets(rank: int) -> None:
    store = dist.distributed_c10d._get_default_store()
    ready(rank)
    store.wait(["a-key-nobody-sets"], timedelta(hours=1))


def stop_myself(rank: int) -> None:
    ready(rank)
    os.kill(os.getpid(), signal.SIGSTOP)


def wait_in_barrier(rank: int) -> None:
    ready(rank)
    dist.barrier()


HANGS = {"busy_loop": busy_loop, "store_wait": wait_for_a_key_nobody_sets, "sigstop": stop_myself}


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    dist.barrier()
    if rank == int(os.environ.get("HANG_RANK", "1")):
        HANGS[os.environ["HANG_HOW"]](rank)
    else:
        wait_in_barrier(rank)
    print(f"rank {rank} was not supposed to get here", flush=True)


if __name__ == "__main__":
    main()
