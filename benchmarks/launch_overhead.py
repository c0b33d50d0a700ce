"""Our launcher against bare torchrun: a 2-rank trivial gloo group, alternated in one run.

Each round launches the launcher tests' all-reduce script once through ``TorchrunGroup`` (log
files, spawn hook, PID records, deadline, reaping) and once as bare ``python -m
torch.distributed.run --standalone``, in alternating order, so machine drift hits both alike.
Prints every time, the medians and their ratio. Target: ours / bare <= 1.1. Bounded: stops
starting rounds after --max-seconds (default 150).

    python benchmarks/launch_overhead.py [--rounds N] [--max-seconds S]
"""

from __future__ import annotations

import sys

from zephon_chaos.bench.launch_timing import (
    alternate,
    bare_torchrun,
    line,
    median,
    our_launch,
    private_root,
    round_args,
    verdict,
)
from zephon_chaos.bench.machine import load_note

TARGET = 1.1


def main(argv: list[str] | None = None) -> int:
    args = round_args(__doc__ or "", argv, rounds=5, max_seconds=150.0, nproc=2)
    with private_root() as root:
        times = alternate(
            {
                "ours": lambda i: our_launch(args.nproc, root, f"ours{i}"),
                "bare": lambda i: bare_torchrun(args.nproc, root),
            },
            args.rounds,
            args.max_seconds,
        )
    ratio = median(times["ours"]) / median(times["bare"])
    print(f"launch overhead, {args.nproc} ranks, trivial gloo script ({load_note()})")
    print(line("our launcher (TorchrunGroup)", times["ours"]))
    print(line("bare torchrun --standalone", times["bare"]))
    print(verdict("ratio ours / bare", ratio, f"<= {TARGET}", ratio <= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
