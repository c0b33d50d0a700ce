"""``zephon-chaos replay FILE``: rerun a saved scenario; exit 1 while it still fails, else 0.

A finding saved by ``explore`` is named after its signature; replay says whether the rerun
fails with that same signature, with another, or no longer fails.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from zephon_chaos.commands import UsageError
from zephon_chaos.commands._scenario_io import Workspace, add_common, prepare, run_once


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument(
        "--times",
        type=int,
        default=1,
        metavar="N",
        help="rerun N times; reproducible when every run fails alike (default 1)",
    )


def run(args: argparse.Namespace) -> int:
    if args.times < 1:
        raise UsageError(f"--times {args.times}: must be at least 1")
    scenario, tier, launch = prepare(args)
    recorded = Path(args.file).stem
    from zephon_chaos.explore.signature import signature

    seen: list[str] = []
    with Workspace(args.keep) as ws:
        for n in range(args.times):
            outcome = run_once(
                scenario, tier, ws.root / f"run{n}", args.deadline, launch, source=args.file
            )
            sig = signature(outcome)
            seen.append(sig or "passed")
            print(outcome.report())
    failing = [s for s in seen if s != "passed"]
    if not failing:
        print(f"replay on the {tier} tier: no longer fails ({args.times} run(s) passed)")
        return 0
    same = all(s == recorded for s in failing)
    how = "reproducible" if len(failing) == len(seen) and len(set(failing)) == 1 else "flaky"
    detail = (
        f"as recorded ({recorded})"
        if same
        else f"with {', '.join(sorted(set(failing)))}"
        + (f" (the file is named {recorded})" if "." in recorded else "")
    )
    print(
        f"replay on the {tier} tier: still fails {detail}; {len(failing)}/{len(seen)} run(s) "
        f"failed ({how})"
    )
    return 1
