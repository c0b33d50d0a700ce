"""Our launcher against bare torchrun: a 2-rank trivial gloo group, alternated in one run.

Each round launches the launcher tests' all-reduce script once through ``TorchrunGroup`` (log
files, spawn hook, PID records, deadline, reaping) and once as bare ``python -m
torch.distributed.run --standalone``, in alternating order, so machine drift hits both alike.
Prints every time, the medians and their ratio. Target: ours / bare <= 1.1. Bounded: stops
starting rounds after --max-seconds (default 150).

    python benchmarks/launch_overhead.py [--rounds N] [--max-seconds S]
"""

from __future__ import annotations

import argparse
import sys
import time

from zephon_chaos.bench.launch_timing import (
    bare_torchrun,
    fits,
    line,
    median,
    our_launch,
    private_root,
    verdict,
)
from zephon_chaos.bench.machine import load_note

TARGET = 1.1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=150.0)
    args = parser.parse_args(argv)
    ours: list[float] = []
    bare: list[float] = []
    began = time.monotonic()
    with private_root() as root:
        for i in range(args.rounds):
            if not fits(began, args.max_seconds, i):
                print(f"  stopped after {i} rounds (--max-seconds {args.max_seconds:.0f})")
                break
            first, second = (("ours", "bare") if i % 2 == 0 else ("bare", "ours"))
            for who in (first, second):
                if who == "ours":
                    ours.append(our_launch(args.nproc, root, f"ours{i}"))
                else:
                    bare.append(bare_torchrun(args.nproc, root))
    ratio = median(ours) / median(bare)
    print(f"launch overhead, {args.nproc} ranks, trivial gloo script ({load_note()})")
    print(line("our launcher (TorchrunGroup)", ours))
    print(line("bare torchrun --standalone", bare))
    print(verdict("ratio ours / bare", ratio, f"<= {TARGET}", ratio <= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
