"""Time to find: per finding signature, how many seeds found it and the median seconds to its
first sighting, over N explore runs (the way FuzzBench and Magma compare fuzzers).

    python benchmarks/time_to_find.py [--seeds 3] [--first-seed 0] [--budget 15m]
        [--plant NAME ... | --each-plant] [--no-plant] [--out DIR] [--json FILE]
        [-- explore options: --tier both --store-faults --max-world 3 ...]

Each seed is one ``zephon-chaos explore`` subprocess with a deadline (its budget plus start-up
and report time); options after ``--`` go to explore unchanged. First sightings come from each
run's ``summary.json``. With ``--plant NAME`` (repeatable) or ``--each-plant`` every seed runs
once per plant (explore's self-test: the plant's signature must be found), and ``--no-plant``
adds runs without one (the known defects). Reports are kept under ``--out`` (default: a
temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from zephon_chaos.bench.time_to_find import SeedRun, run_explore, run_line, table, time_to_find
from zephon_chaos.explore.budget import format_duration, parse_duration
from zephon_chaos.workload.plants import PLANTS


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=0, metavar="S")
    parser.add_argument("--budget", default="15m", help="each run's budget (default 15m)")
    parser.add_argument(
        "--plant",
        action="append",
        default=[],
        choices=sorted(PLANTS),
        metavar="NAME",
        help=f"run with this planted defect (repeatable): {', '.join(PLANTS)}",
    )
    parser.add_argument("--each-plant", action="store_true", help="run every plant in turn")
    parser.add_argument(
        "--no-plant", action="store_true", help="also run without a plant (default without any "
        "--plant or --each-plant)"
    )
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="keep reports here")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="results as JSON")
    args, extra = parser.parse_known_args(argv)
    if extra and extra[0] == "--":
        extra = extra[1:]
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    try:
        args.budget_s = parse_duration(args.budget)
    except ValueError as exc:
        parser.error(f"--budget: {exc}")
    for flag in ("--seed", "--report", "--budget", "--plant"):
        if any(a == flag or a.startswith(flag + "=") for a in extra):
            parser.error(f"{flag} is this benchmark's to set; see --help")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse(argv)
    plants: list[str | None] = list(PLANTS) if args.each_plant else list(args.plant)
    if args.no_plant or not plants:
        plants.insert(0, None)
    root = args.out or Path(tempfile.mkdtemp(prefix="zc-time-to-find-"))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    runs: list[SeedRun] = []
    try:
        for plant in plants:
            print(f"{plant or 'no plant'}: {args.seeds} seed(s), budget "
                  f"{format_duration(args.budget_s)}, explore {' '.join(extra) or '(defaults)'}",
                  flush=True)
            for seed in seeds:
                report = root / (plant or "no-plant") / f"seed-{seed}"
                run = run_explore(seed, args.budget_s, args.budget, report, plant, extra)
                runs.append(run)
                print(f"  {run_line(run)}", flush=True)
        rows = time_to_find(runs)
        for plant in plants:
            print()
            print(f"{plant or 'no plant'}: first sightings over {args.seeds} seed(s) "
                  "(median of the seeds that found it)")
            mine = [r for r in rows if r.plant == plant]
            print("\n".join(table(mine)) if mine else "  nothing found")
        if args.json is not None:
            doc = {
                "budget_s": args.budget_s,
                "seeds": list(seeds),
                "explore_options": extra,
                "runs": [
                    {**asdict(r), "report": str(r.report), "summary": None} for r in runs
                ],
                "time_to_find": [{**asdict(r), "median_s": r.median_s} for r in rows],
            }
            args.json.write_text(json.dumps(doc, indent=2) + "\n")
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if any(r.problem for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
