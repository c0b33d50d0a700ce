"""Scenarios explored with ``explore --jobs 1`` and ``--jobs N``, same budget, in one run.

    python benchmarks/explore_jobs.py [--budget 2m] [--jobs 2] [--rounds 1] [--seed 0]
        [--out DIR] [-- explore options: --tier inproc --store-faults ...]

Each round runs ``zephon-chaos explore --jobs 1`` and ``--jobs N`` one after the other (the
order alternating from round to round, so neither always gets the machine's quieter minutes),
each a subprocess with a deadline (``bench.time_to_find.run_explore``), and reads the in-process
scenarios of each from its ``summary.json`` (the merged one's are the shards' sum). It prints
both counts and their ratio; the target is 1.7x with ``--jobs 2`` on 2 cores, the in-process
tier being one core's work. Options after ``--`` go to both runs (default ``--tier inproc``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from zephon_chaos.bench.time_to_find import SeedRun, run_explore
from zephon_chaos.explore.budget import format_duration, parse_duration
from zephon_chaos.explore.jobs import usable_cores

TARGET = 1.7
"""Scenarios with ``--jobs 2`` over those with ``--jobs 1``, on 2 cores."""


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget", default="2m", help="each run's budget (default 2m)")
    parser.add_argument("--jobs", type=int, default=2, metavar="N", help="against 1 (default 2)")
    parser.add_argument("--rounds", type=int, default=1, metavar="R", help="pairs (default 1)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="explore's seed")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="keep reports here")
    args, extra = parser.parse_known_args(argv)
    if extra and extra[0] == "--":
        extra = extra[1:]
    if args.jobs < 2 or args.rounds < 1:
        parser.error("--jobs must be at least 2 and --rounds at least 1")
    try:
        args.budget_s = parse_duration(args.budget)
    except ValueError as exc:
        parser.error(f"--budget: {exc}")
    for flag in ("--seed", "--report", "--budget", "--jobs", "--shard"):
        if any(a == flag or a.startswith(flag + "=") for a in extra):
            parser.error(f"{flag} is this benchmark's to set; see --help")
    return args, extra or ["--tier", "inproc"]


def scenarios(run: SeedRun) -> tuple[int, int]:
    """(in-process scenarios, of them new) of a run; (0, 0) without a summary."""
    if run.summary is None or "inproc" not in run.summary.tiers:
        return 0, 0
    t = run.summary.tiers["inproc"]
    return t.scenarios, t.new_scenarios


def main(argv: list[str] | None = None) -> int:
    args, extra = parse(argv)
    root = args.out or Path(tempfile.mkdtemp(prefix="zc-explore-jobs-"))
    totals = {1: 0, args.jobs: 0}
    problems = []
    print(
        f"explore {' '.join(extra)}, budget {format_duration(args.budget_s)}, seed {args.seed}, "
        f"{usable_cores()} usable CPU(s): --jobs 1 against --jobs {args.jobs}",
        flush=True,
    )
    try:
        for r in range(args.rounds):
            order = (1, args.jobs) if r % 2 == 0 else (args.jobs, 1)
            for jobs in order:
                report = root / f"round-{r + 1}" / f"jobs-{jobs}"
                run = run_explore(
                    args.seed,
                    args.budget_s,
                    args.budget,
                    report,
                    None,
                    [*extra, "--jobs", str(jobs)],
                )
                total, new = scenarios(run)
                totals[jobs] += total
                print(
                    f"  round {r + 1}, --jobs {jobs}: {total} in-process scenarios ({new} new), "
                    f"exit {run.exit_code}, {run.seconds:.0f}s"
                    + (f"; {run.problem}" if run.problem else ""),
                    flush=True,
                )
                if run.problem:
                    problems.append(run.problem)
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)
    one, many = totals[1], totals[args.jobs]
    ratio = many / one if one else float("inf")
    print(f"in-process scenarios: --jobs 1 {one}, --jobs {args.jobs} {many}: {ratio:.2f}x", end="")
    print(f" (target {TARGET}x with --jobs 2 on 2 cores)" if args.jobs == 2 else "")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
