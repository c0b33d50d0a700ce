"""``zephon-chaos explore``: generate scenarios, run them, report minimal violations.

Exit status (:class:`ExitStatus`): 0 when nothing but known defects and flaky findings was
found; 1 when a violation was found (a failure of the code under test that its confirmation
reruns reproduced, or that could not be rerun in time), or a flaky finding with
``--fail-on-flaky``; 3 when the harness failed (it raised, or could not describe a failure)
and there is no violation: the harness's bug, never a finding in Zephon, but not to go
unseen; 130 when interrupted (the report covers what ran until then); 2 for bad flags.
"""

from __future__ import annotations

import argparse
import enum
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from zephon_chaos.commands import UsageError
from zephon_chaos.commands._scenario_io import add_launch_options, check_launch
from zephon_chaos.directories import make_directory
from zephon_chaos.explore.findings import Finding, Section
from zephon_chaos.launch.launch_spec import DEFAULT_LAUNCH_LANE

if TYPE_CHECKING:
    from zephon_chaos.explore.search import ExploreConfig
    from zephon_chaos.explore.summary import ExploreResult

TIERS = ("inproc", "torchrun", "both")


class ExitStatus(enum.IntEnum):
    CLEAN = 0
    """Nothing found but known defects and flaky findings."""
    VIOLATION = 1
    """A violation (or, with ``--fail-on-flaky``, a flaky finding)."""
    USAGE = 2
    """Bad flags or files (raised as ``UsageError``, turned into this by the CLI)."""
    HARNESS = 3
    """No violation, but the harness failed: its own problem, reported apart."""
    INTERRUPTED = 130


def exit_status(
    result: ExploreResult, fail_on_flaky: bool = False, shards_failed: bool = False
) -> ExitStatus:
    """What the findings make of the run, one run's or the merged report of ``--jobs``'s
    shards alike; a violation outranks a harness problem. ``shards_failed``: some shard of
    ``--jobs`` ended without a report of its own, a failure of the harness."""
    if result.interrupted:
        return ExitStatus.INTERRUPTED
    if result.in_section(Section.VIOLATION):
        return ExitStatus.VIOLATION
    if fail_on_flaky and result.in_section(Section.FLAKY):
        return ExitStatus.VIOLATION
    if result.in_section(Section.HARNESS) or shards_failed:
        return ExitStatus.HARNESS
    return ExitStatus.CLEAN


SECTION_HEADS: dict[Section, str] = {
    Section.VIOLATION: "violations",
    Section.FLAKY: "flaky (a rerun did not reproduce it; not counted unless --fail-on-flaky)",
    Section.HARNESS: "harness problems (the harness's own bug, never the code under test's)",
    Section.KNOWN: "known defects",
    Section.LIMITATION: "known limitations (documented; consequence and mitigation listed)",
}


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
    add_launch_options(parser, default_launch=DEFAULT_LAUNCH_LANE)
    parser.add_argument(
        "--store-faults",
        action="store_true",
        help="also generate faults on a rank's link to the store (latency, a cut, a reset; "
        "a stall on torchrun) from the start or at a point of a checkpoint round, with the "
        "retry policy after a failed checkpoint (none, lockstep, independent, skip); each "
        "rank, a thread in process, reaches the store through a proxy of its own",
    )
    parser.add_argument(
        "--no-aim",
        dest="aim",
        action="store_false",
        help="no rounds aimed at the fault cells (action, round point, aggregation, retry) no "
        "tier reached yet; by default they take up to half of each tier's search",
    )
    parser.add_argument(
        "--profile",
        default="default",
        help="odds of the generated pipelines: default (worker processes rare: each launch of "
        "them takes tens of seconds), or downstream: on torchrun, what torchtitan-zephon runs "
        "(runner process, mtp_mode, torchrun's store, DCP persistence) is the common case",
    )
    parser.add_argument(
        "--plant",
        default=None,
        metavar="NAME",
        help="self-test: give every scenario a deliberate workload defect (see "
        "zephon_chaos.workload.plants), which the search must find and shrink",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="run the exploration as N local shards, one process each, sharing the budget's "
        "wall time, one example database and one merged report (REPORT/shards/<i> keeps each "
        "shard's own); 1: in this process, as a single run (default: the CPUs this process may "
        "use; 1 with --shard)",
    )
    parser.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="run shard I of N (1 <= I <= N) of one exploration split across runners: with the "
        "same --seed, no two shards draw the same scenarios; `zephon-chaos report merge` joins "
        "their reports",
    )
    parser.add_argument(
        "--database",
        default=None,
        metavar="URL|PATH",
        help="share failing scenarios with other runs through a Hypothesis example database, "
        "replayed first in every round: redis://HOST:PORT/DB or unix:///PATH (a Redis server; "
        "pip install 'zephon-chaos[shard]'), github-artifact:OWNER/REPO[/ARTIFACT] (read only; "
        "what this run finds goes to REPORT/example-db), a directory, or none (default)",
    )
    parser.add_argument(
        "--junitxml",
        default=None,
        metavar="PATH",
        help="also write the findings as JUnit XML: a test case per signature (violations "
        "fail, harness problems are errors, known defects are skipped, flaky ones too unless "
        "--fail-on-flaky)",
    )
    parser.add_argument(
        "--fail-on-flaky",
        action="store_true",
        help="exit 1 for a flaky finding too (one that a confirmation rerun did not "
        "reproduce); by default it is reported apart and does not fail the run",
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
    launch = check_launch(args.launch)
    if args.plant is not None and args.plant not in PLANTS:
        raise UsageError(f"--plant {args.plant!r}: choose one of {', '.join(PLANTS)}")
    from zephon_chaos.strategies import PROFILES

    if args.profile not in PROFILES:
        raise UsageError(f"--profile {args.profile!r}: choose one of {', '.join(PROFILES)}")
    from zephon_chaos.explore.shard import Shard

    shard = Shard()
    if getattr(args, "shard", None) is not None:
        try:
            shard = Shard.parse(args.shard)
        except ValueError as exc:
            raise UsageError(f"--shard {exc}") from None
    report = Path(args.report)
    if why := make_directory(report):
        raise UsageError(f"--report {report}: {why}")
    junit = getattr(args, "junitxml", None)
    if junit is not None and (why := make_directory(Path(junit).parent)):
        raise UsageError(f"--junitxml {junit}: its folder {why}")
    return ExploreConfig(
        budget_s=budget,
        report_dir=report,
        tier=args.tier,
        seed=args.seed if args.seed is not None else random.randrange(1_000_000),
        max_world=args.max_world,
        max_phases=args.max_phases,
        plant=args.plant,
        deadline_s=args.deadline,
        launch=launch,
        store_faults=args.store_faults,
        profile=args.profile,
        aim=args.aim,
        stream=sys.stderr,
        shard=shard,
        database=getattr(args, "database", None),
    )


def jobs_of(jobs: int | None, shard: str | None, cores: int) -> int:
    """How many local shards ``--jobs`` asks for: the ``cores`` by default, one under a
    ``--shard`` of the user's (a shard is not split again); UsageError naming the flag."""
    if jobs is None:
        return 1 if shard is not None else max(cores, 1)
    if jobs < 1:
        raise UsageError(
            f"--jobs {jobs}: must be at least 1 (1 explores in this process; leave it out for "
            f"one per CPU, {cores} here)"
        )
    if jobs > 1 and shard is not None:
        raise UsageError(
            f"--jobs {jobs} with --shard {shard}: a shard of a split run is not split again; "
            "give each runner its --shard and leave --jobs out (or --jobs 1), or drop --shard "
            "to split this run into local shards"
        )
    return jobs


JOBS_OWN = ("--jobs", "--shard", "--report", "--database", "--junitxml", "--seed")
"""Flags a child of ``--jobs`` is given by the parent (:func:`child_options` leaves them)."""


def child_options(args: argparse.Namespace, seed: int) -> list[str]:
    """The flags of ``args`` as a child explore of ``--jobs`` takes them: every option of this
    command's parser with its value (so a new option reaches the children unasked), the seed
    drawn once for all, but none of ``JOBS_OWN`` (the parent sets them per child)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    options = ["--seed", str(seed)]
    for action in parser._actions:  # argparse has no public list of a parser's options
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is None or flag in JOBS_OWN:
            continue
        value = getattr(args, action.dest)
        if action.nargs == 0:  # store_true / store_false: given when not the default
            if value != action.default:
                options.append(flag)
        elif value is not None:
            options += [flag, str(value)]
    return options


NATIVE_LOG = "native-stderr.log"
"""In the report: what native code (c10d's C++ logging) and Zephon's own log lines in the
in-process ranks, and in the threads they started, wrote to stderr during the run."""


def run(args: argparse.Namespace) -> int:
    config = _config(args)
    from zephon_chaos.explore.jobs import usable_cores

    cores = usable_cores()
    jobs = jobs_of(getattr(args, "jobs", None), getattr(args, "shard", None), cores)
    if jobs > 1:
        return _explore_jobs(args, config, jobs, cores)
    from zephon_chaos.commands.native_stderr import native_stderr_to
    from zephon_chaos.inproc.rank_group import RANK_THREADS

    log = config.report_dir / NATIVE_LOG
    with native_stderr_to(log, divert=RANK_THREADS.current), RANK_THREADS.inheriting():
        config.stream = sys.stderr
        return _explore(args, config)


def _explore(args: argparse.Namespace, config: ExploreConfig) -> int:
    from zephon_chaos.explore.budget import format_duration
    from zephon_chaos.explore.database import DatabaseError
    from zephon_chaos.explore.search import Explorer

    try:
        explorer = Explorer(config)  # opens the example database: a bad one starts nothing
    except DatabaseError as exc:
        raise UsageError(f"--database {exc}") from None
    shard = f", shard {config.shard}" if config.shard.sharded else ""
    print(
        f"exploring for {format_duration(config.budget_s)} on the {config.tier} tier "
        f"(seed {config.seed}{shard}); report in {config.report_dir}",
        file=sys.stderr,
    )
    return int(_conclude(args, explorer.run()))


def _explore_jobs(args: argparse.Namespace, config: ExploreConfig, jobs: int, cores: int) -> int:
    """``--jobs N``, N > 1: N children explore a shard each; their reports merge into the
    report folder, which then reads as one run's (:mod:`zephon_chaos.explore.jobs`)."""
    from zephon_chaos.explore.budget import format_duration
    from zephon_chaos.explore.database import DatabaseError, close_database, open_database
    from zephon_chaos.explore.jobs import (
        child_argv,
        joins_databases,
        merged_result,
        read_shards,
        run_jobs,
        shared_database,
    )
    from zephon_chaos.explore.merge import merge, write_merged
    from zephon_chaos.explore.shard import Shard

    report = config.report_dir
    database = shared_database(config.database, report)
    try:  # a database that cannot be opened starts nothing, as in a single run
        close_database(open_database(database, report))
    except DatabaseError as exc:
        raise UsageError(f"--database {exc}") from None
    if jobs > cores:
        print(
            f"note: --jobs {jobs} is more than the {cores} CPU(s) this process may use: the "
            "shards share them (each gets less of the budget's wall time)",
            file=sys.stderr,
        )
    print(
        f"exploring for {format_duration(config.budget_s)} on the {config.tier} tier as "
        f"{jobs} local shards (seed {config.seed}, database {database}); report in {report}",
        file=sys.stderr,
    )
    options = child_options(args, config.seed)
    shards = [Shard(i, jobs) for i in range(1, jobs + 1)]
    done = run_jobs(
        [(s, child_argv(options, s, report, database)) for s in shards],
        report,
        config.budget_s,
        sys.stderr,
    )
    reports, unread = read_shards(done.runs)
    for run in done.runs:
        if run.shard in unread or run.problem or run.leftovers:
            print(f"zephon-chaos explore: {run.line()}", file=sys.stderr)
    if not reports:
        print(
            f"zephon-chaos explore: no shard wrote a report (see {report}/shards/*/stderr.log)",
            file=sys.stderr,
        )
        return int(ExitStatus.INTERRUPTED if done.interrupted else ExitStatus.HARNESS)
    merged = merge(reports)
    write_merged(merged, report, join_databases=joins_databases(database, report))
    result = merged_result(
        merged, report, budget_s=config.budget_s, elapsed_s=done.elapsed_s,
        max_world=config.max_world,
    )
    result.interrupted = result.interrupted or done.interrupted
    return int(_conclude(args, result, shards_failed=bool(done.failed)))


def _conclude(
    args: argparse.Namespace, result: ExploreResult, shards_failed: bool = False
) -> ExitStatus:
    """What the run found, on stdout; its CI files; its exit status (one run or merged)."""
    print(f"{result.scenarios} scenarios, {len(result.findings)} finding(s)")
    for section in Section:
        found = result.in_section(section)
        if found:
            print(f"{SECTION_HEADS[section]}:")
            for finding in found:
                _print_finding(finding)
    print(f"report: {result.report_dir / 'summary.md'}")
    fail_on_flaky = bool(getattr(args, "fail_on_flaky", False))
    _write_ci_reports(result, getattr(args, "junitxml", None), fail_on_flaky)
    status = exit_status(result, fail_on_flaky=fail_on_flaky, shards_failed=shards_failed)
    if status is ExitStatus.INTERRUPTED:
        print("zephon-chaos explore: interrupted; everything started was stopped", file=sys.stderr)
    elif status is ExitStatus.HARNESS:
        shards = "; a shard ended without its report" if shards_failed else ""
        print(
            "zephon-chaos explore: no violation, but the harness failed "
            f"({len(result.in_section(Section.HARNESS))} harness problem(s), listed apart in "
            f"the report{shards}): a bug of zephon-chaos to fix, not a finding in Zephon",
            file=sys.stderr,
        )
    return status


def _write_ci_reports(result: ExploreResult, junitxml: str | None, fail_on_flaky: bool) -> None:
    """``--junitxml``, and the step summary under GitHub Actions (``GITHUB_STEP_SUMMARY``)."""
    from zephon_chaos.explore.junit import write_junit
    from zephon_chaos.explore.step_summary import append_step_summary

    if junitxml is not None:
        print(f"junit xml: {write_junit(result, Path(junitxml), fail_on_flaky)}")
    append_step_summary(result)


def _print_finding(finding: Finding) -> None:
    reruns = f"; reruns: {', '.join(finding.reruns)}" if finding.reruns else ""
    print(f"  {finding.signature} [{finding.label}{reruns}]: {finding.scenario.summary()}")
    json_path = next((p for p in finding.files if p.suffix == ".json"), None)
    if json_path is not None:
        from zephon_chaos.explore.tiers import replay_command

        print(f"    replay: {replay_command(json_path, finding.tier)}")
