"""``zephon-chaos explore``: generate scenarios, run them, report minimal violations.

Exit status: 0 when nothing but known defects was found, 1 when a violation was found,
130 when interrupted (the report covers what ran until then), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from zephon_chaos.cli import UsageError
from zephon_chaos.commands._scenario_io import add_launch_options

TIERS = ("inproc", "torchrun", "both")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        default="10m",
        help="how long to explore: seconds (300), 90s, 10m or 1h30m (default 10m)",
    )
    parser.add_argument(
        "--tier",
        default="inproc",
        help="inproc: rank threads in this process (fast, for searching and shrinking); "
        "torchrun: real groups (crashes, launch paths, worker processes); both: search "
        "in-process, then replay findings and search on torchrun (default inproc)",
    )
    parser.add_argument(
        "--report",
        default="chaos-report",
        metavar="DIR",
        help="where summary.md, timeline.png and findings/ go (default ./chaos-report)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the search (random)")
    parser.add_argument(
        "--max-world", type=int, default=4, metavar="N", help="largest world size (default 4)"
    )
    parser.add_argument(
        "--max-phases",
        type=int,
        default=5,
        metavar="N",
        help="most launches in one scenario, 1..5 (default 5)",
    )
    add_launch_options(parser, default_launch="warm")
    parser.add_argument(
        "--store-faults",
        action="store_true",
        help="torchrun tier: also generate faults on a rank's link to the store (latency, "
        "a cut, a reset) at a point of a checkpoint round, with the retry policy after a "
        "failed checkpoint (none, lockstep, independent)",
    )
    parser.add_argument(
        "--plant",
        default=None,
        metavar="NAME",
        help="self-test: give every scenario a deliberate workload defect (see "
        "zephon_chaos.workload.plants), which the search must find and shrink",
    )


def _config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from zephon_chaos.explore.budget import parse_duration
    from zephon_chaos.explore.search import ExploreConfig
    from zephon_chaos.workload.plants import PLANTS

    try:
        budget = parse_duration(args.budget)
    except ValueError as exc:
        raise UsageError(f"--budget: {exc}") from None
    if args.tier not in TIERS:
        raise UsageError(f"--tier {args.tier!r}: choose one of {', '.join(TIERS)}")
    if args.max_world < 1:
        raise UsageError(f"--max-world {args.max_world}: must be at least 1")
    if not 1 <= args.max_phases <= 5:
        raise UsageError(f"--max-phases {args.max_phases}: must be within 1..5")
    if args.deadline <= 0:
        raise UsageError(f"--deadline {args.deadline}: must be positive")
    from zephon_chaos.explore.tiers import LAUNCHES

    if args.launch not in LAUNCHES:
        raise UsageError(f"--launch {args.launch!r}: choose one of {', '.join(LAUNCHES)}")
    if args.store_faults and args.tier == "inproc":
        raise UsageError(
            "--store-faults needs --tier torchrun or both: the fault proxy sits between rank "
            "processes and torchrun's store"
        )
    if args.plant is not None and args.plant not in PLANTS:
        raise UsageError(f"--plant {args.plant!r}: choose one of {', '.join(PLANTS)}")
    report = Path(args.report)
    if report.exists() and not report.is_dir():
        raise UsageError(f"--report {report}: exists and is not a directory")
    try:
        report.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--report {report}: cannot create it ({exc.strerror})") from None
    return ExploreConfig(
        budget_s=budget,
        report_dir=report,
        tier=args.tier,
        seed=args.seed if args.seed is not None else random.randrange(1_000_000),
        max_world=args.max_world,
        max_phases=args.max_phases,
        plant=args.plant,
        deadline_s=args.deadline,
        launch=args.launch,
        store_faults=args.store_faults,
        stream=sys.stderr,
    )


def run(args: argparse.Namespace) -> int:
    config = _config(args)
    from zephon_chaos.explore.budget import format_duration
    from zephon_chaos.explore.search import Explorer

    print(
        f"exploring for {format_duration(config.budget_s)} on the {config.tier} tier "
        f"(seed {config.seed}); report in {config.report_dir}",
        file=sys.stderr,
    )
    result = Explorer(config).run()
    print(f"{result.scenarios} scenarios, {len(result.findings)} finding(s)")
    for finding in result.findings:
        json_path = next((p for p in finding.files if p.suffix == ".json"), None)
        print(f"  {finding.signature} [{finding.label}]: {finding.scenario.summary()}")
        if json_path is not None:
            from zephon_chaos.explore.tiers import replay_command

            print(f"    replay: {replay_command(json_path, finding.tier)}")
    print(f"report: {config.report_dir / 'summary.md'}")
    if result.interrupted:
        print("zephon-chaos explore: interrupted; everything started was stopped", file=sys.stderr)
        return 130
    return 1 if result.violations else 0
