"""``zephon-chaos replay FILE``: rerun a saved scenario; exit 1 while it still fails, else 0.

A finding saved by ``explore`` records the signature, tier and launch lane it was found with
(an older file: its name is the signature); replay runs it as found unless ``--tier`` or
``--launch`` says otherwise, says which it used, and whether the rerun fails with that same
signature, with another, or no longer fails.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from zephon_chaos.commands import UsageError
from zephon_chaos.commands._scenario_io import Workspace, add_common, prepare, run_once
from zephon_chaos.scenario import Scenario


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
    scenario, setting = prepare(args)
    recorded = recorded_signature(scenario, args.file)
    from zephon_chaos.explore.signature import signature

    print(f"replaying {scenario.summary()} on {setting.describe()}")
    seen: list[str] = []
    with Workspace(args.keep) as ws:
        for n in range(args.times):
            outcome = run_once(
                scenario,
                setting.tier,
                ws.root / f"run{n}",
                args.deadline,
                setting.launch,
                source=args.file,
            )
            sig = signature(outcome)
            seen.append(sig or "passed")
            print(outcome.report())
    failing = [s for s in seen if s != "passed"]
    on = setting.describe()
    if not failing:
        print(f"replay on {on}: no longer fails ({args.times} run(s) passed)")
        return 0
    same = all(s == recorded for s in failing)
    how = "reproducible" if len(failing) == len(seen) and len(set(failing)) == 1 else "flaky"
    detail = (
        f"as recorded ({recorded})"
        if same
        else f"with {', '.join(sorted(set(failing)))}"
        + (f" (recorded: {recorded})" if "." in recorded else "")
    )
    print(
        f"replay on {on}: still fails {detail}; {len(failing)}/{len(seen)} run(s) "
        f"failed ({how})"
    )
    return 1


def recorded_signature(scenario: Scenario, file: str) -> str:
    """The signature the scenario was found with: recorded in the file, else (a file saved
    before it was recorded) its name, which ``explore`` made from the signature."""
    return scenario.found.signature if scenario.found is not None else Path(file).stem
