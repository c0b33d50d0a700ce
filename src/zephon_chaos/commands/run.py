"""``zephon-chaos run FILE``: run one scenario and print its verdict.

Exit status, as ``explore``'s: 0 when it passes or fails only by known defects of Zephon
(named), 1 for a violation, 3 when the harness itself could not run or describe it (our
bug, reported apart), 2 for a bad file or flags.
"""

from __future__ import annotations

import argparse
import enum

from zephon_chaos.commands._scenario_io import Workspace, add_common, prepare, run_once


class Verdict(enum.Enum):
    """What one run of a scenario amounts to; the value is what the verdict line prints."""

    OK = "ok"
    KNOWN = "known defect only"
    VIOLATION = "VIOLATION"
    HARNESS = "HARNESS PROBLEM"

    @classmethod
    def of(cls, sig: str | None) -> Verdict:
        if sig is None:
            return cls.OK
        area = sig.split(".", 1)[0]
        return {"known": cls.KNOWN, "harness": cls.HARNESS}.get(area, cls.VIOLATION)

    @property
    def exit_status(self) -> int:
        return {Verdict.VIOLATION: 1, Verdict.HARNESS: 3}.get(self, 0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    scenario, setting = prepare(args)
    with Workspace(args.keep) as ws:
        print(f"running {scenario.summary()} on {setting.describe()}")
        outcome = run_once(
            scenario, setting.tier, ws.root, args.deadline, setting.launch, source=args.file
        )
        print(outcome.report())
        from zephon_chaos.explore.known import explaining
        from zephon_chaos.explore.signature import signature

        sig = signature(outcome)
        for defect in explaining(outcome):
            print(f"known defect {defect.id}: {defect.summary}")
        if ws.keep is not None:
            print(f"working files kept under {ws.root}")
    verdict = Verdict.of(sig)
    print(f"verdict: {verdict.value}" + (f" ({sig})" if sig else ""))
    return verdict.exit_status
