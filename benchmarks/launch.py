"""The warm lane against the CLI path and bare torchrun, on one 3-phase scenario, in one run.

Three ways to pay for the same three launches (reference W=2, save W=2, resume W=3):
the scenario via the CLI path (``python -m torch.distributed.run`` per launch), the same
scenario via the warm lane (agents and workers forked from a pre-warmed server; the server's
one-time start is printed apart), the scenario as three bare ``torchrun --standalone -m
zephon_chaos.rank SPEC`` launches (the same rank program and specs, none of the harness:
no log directory, spawn hook, PID records or deadline), and, for scale, three bare launches of
a trivial gloo script (no Zephon import in the ranks). Alternated per round. Targets: warm at
least 2x faster than CLI, and CLI <= 1.3x the same scenario launched bare. Bounded by
--max-seconds (240).

    python benchmarks/launch.py [--rounds N] [--max-seconds S]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from zephon_chaos.bench.launch_timing import (
    alternate,
    bare_scenario,
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
from zephon_chaos.launch.warm import WarmServerProcess, warm_launcher
from zephon_chaos.runner import Launcher

WARM_SPEEDUP = 2.0
CLI_OVER_BARE = 1.3


def main(argv: list[str] | None = None) -> int:
    args = round_args(__doc__ or "", argv, rounds=2, max_seconds=240.0)
    with private_root() as root:
        started = time.monotonic()
        with WarmServerProcess(root / "warm-server") as server:
            server_start = time.monotonic() - started

            def warm(work: Path) -> Launcher:
                return warm_launcher(server, work)

            ways = {
                "cli": lambda i: scenario_seconds(cli, root, f"cli{i}"),
                "warm": lambda i: scenario_seconds(warm, root, f"warm{i}"),
                "bare": lambda i: bare_workload_scenario(root, f"bare{i}"),
                "trivial": lambda i: bare_scenario(root),
            }
            times = alternate(ways, args.rounds, args.max_seconds - server_start)
    cli_s, warm_s, bare_s, trivial_s = (
        median(times[k]) for k in ("cli", "warm", "bare", "trivial")
    )
    print(f"3-phase scenario (W 2, 2, 3): CLI path, warm lane, bare torchrun ({load_note()})")
    print(line("scenario via the CLI path", times["cli"]))
    print(line("scenario via the warm lane", times["warm"]))
    print(line("scenario as 3 bare launches", times["bare"]))
    print(line("3 bare launches, trivial script", times["trivial"]))
    print(f"  warm server start (once per session)   {server_start:6.2f} s")
    speedup = cli_s / warm_s
    print(verdict("speed-up CLI / warm", speedup, f">= {WARM_SPEEDUP}", speedup >= WARM_SPEEDUP))
    over = cli_s / bare_s
    print(verdict("ratio CLI / bare", over, f"<= {CLI_OVER_BARE}", over <= CLI_OVER_BARE))
    print(f"  {'ratio CLI / bare trivial script':34s} {cli_s / trivial_s:6.2f}   "
          "(for scale: includes Zephon's import in every rank)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
