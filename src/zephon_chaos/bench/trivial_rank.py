"""The trivial rank program of the launch benchmarks: one gloo all-reduce, then a barrier.

It ships with the package (run as ``-m zephon_chaos.bench.trivial_rank``) so that the
benchmarks find it whatever the install mode: from a wheel in a tox environment as well as
from an editable checkout. It imports torch but not Zephon, so a launch measures the
launcher, not Zephon's import.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(value)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
