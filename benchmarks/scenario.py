"""One 3-phase scenario through the CLI path against three bare torchrun launches.

The scenario: reference at W=2, save at step 2 at W=2, resume at W=3 (``ScenarioRunner``, the
real workload, records, oracles). The bare side: the same three launches of the workload as
a person types them, ``torchrun --standalone -m zephon_chaos.rank SPEC``, with none of the
harness. Alternated in one run; prints the times, medians and the ratio. Target: scenario /
bare <= 1.3. Bounded by --max-seconds (170). ``launch.py`` adds the warm lane beside these.

    python benchmarks/scenario.py [--rounds N] [--max-seconds S]
"""

from __future__ import annotations

import sys

from zephon_chaos.bench.launch_timing import (
    alternate,
    bare_workload_scenario,
    cli,
    line,
    median,
    private_root,
    round_args,
    scenario_seconds,
    verdict,
)
from zephon_chaos.bench.machine import load_note

TARGET = 1.3


def main(argv: list[str] | None = None) -> int:
    args = round_args(__doc__ or "", argv, rounds=2, max_seconds=170.0)
    with private_root() as root:
        times = alternate(
            {
                "cli": lambda i: scenario_seconds(cli, root, f"cli{i}"),
                "bare": lambda i: bare_workload_scenario(root, f"bare{i}"),
            },
            args.rounds,
            args.max_seconds,
        )
    ratio = median(times["cli"]) / median(times["bare"])
    print(f"3-phase scenario (W 2, 2, 3) vs three bare launches ({load_note()})")
    print(line("scenario via the CLI path", times["cli"]))
    print(line("scenario as 3 bare launches", times["bare"]))
    print(verdict("ratio CLI scenario / bare", ratio, f"<= {TARGET}", ratio <= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
