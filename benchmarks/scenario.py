"""One 3-phase scenario through the CLI path against three bare torchrun launches.

The scenario: reference at W=2, save at step 2 at W=2, resume at W=3 (``ScenarioRunner``, the
real workload, records, oracles). The bare side: three ``torchrun --standalone`` launches of
a trivial gloo script with the same rank counts. Alternated in one run; prints the times,
medians and the ratio. Target: scenario / bare <= 1.3. Bounded by --max-seconds (170).

    python benchmarks/scenario.py [--rounds N] [--max-seconds S]
"""

from __future__ import annotations

import argparse
import sys
import time

from zephon_chaos.bench.launch_timing import (
    bare_scenario,
    cli,
    fits,
    line,
    median,
    private_root,
    scenario_seconds,
    verdict,
)
from zephon_chaos.bench.machine import load_note

TARGET = 1.3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=170.0)
    args = parser.parse_args(argv)
    scenario: list[float] = []
    bare: list[float] = []
    began = time.monotonic()
    with private_root() as root:
        for i in range(args.rounds):
            if not fits(began, args.max_seconds, i):
                print(f"  stopped after {i} rounds (--max-seconds {args.max_seconds:.0f})")
                break
            order = ("cli", "bare") if i % 2 == 0 else ("bare", "cli")
            for who in order:
                if who == "cli":
                    scenario.append(scenario_seconds(cli, root, f"cli{i}"))
                else:
                    bare.append(bare_scenario(root))
    ratio = median(scenario) / median(bare)
    print(f"3-phase scenario (W 2, 2, 3) vs three bare launches ({load_note()})")
    print(line("scenario via the CLI path", scenario))
    print(line("3 bare torchrun launches", bare))
    print(verdict("ratio CLI scenario / bare", ratio, f"<= {TARGET}", ratio <= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
