"""``zephon-chaos run FILE``: run one scenario and print its verdict (exit 0 ok, 1 violation)."""

from __future__ import annotations

import argparse

from zephon_chaos.commands._scenario_io import Workspace, add_common, prepare, run_once


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    scenario, tier, launch = prepare(args)
    with Workspace(args.keep) as ws:
        print(f"running {scenario.summary()} on the {tier} tier")
        outcome = run_once(scenario, tier, ws.root, args.deadline, launch, source=args.file)
        print(outcome.report())
        from zephon_chaos.explore.known import explaining
        from zephon_chaos.explore.signature import signature

        sig = signature(outcome)
        for defect in explaining(outcome):
            print(f"known defect {defect.id}: {defect.summary}")
        if ws.keep is not None:
            print(f"working files kept under {ws.root}")
    if sig is None:
        print("verdict: ok")
        return 0
    print(f"verdict: VIOLATION ({sig})")
    return 1
