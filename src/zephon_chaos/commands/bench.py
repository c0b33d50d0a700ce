"""``zephon-chaos bench aggregation``: how checkpoint aggregation scales (time and traffic)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from zephon_chaos.commands import UsageError
from zephon_chaos.directories import make_directory

SUBCOMMANDS = {"aggregation": "checkpoint aggregation time and store traffic at scale"}


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,2,4, got {text!r}") from None


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,8, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="WHAT")
    sub.required = True
    p = sub.add_parser("aggregation", help=SUBCOMMANDS["aggregation"],
                       description=SUBCOMMANDS["aggregation"] + ". Ranks are threads of this "
                       "process; everything listens on 127.0.0.1 only.")
    p.add_argument("--out", type=Path, default=Path("bench-aggregation"), metavar="DIR",
                   help="where the CSV files and PNG plots go (default: ./bench-aggregation)")
    p.add_argument("--quick", action="store_true",
                   help="a small grid (W 1,4,16; +0/+10 ms; 3 rounds; 1 and 8 MiB values)")
    p.add_argument("--worlds", type=_ints, metavar="W,..", help="world sizes (divisors of 16)")
    p.add_argument("--latencies", type=_ints, metavar="MS,..", help="one-way latencies, ms")
    p.add_argument("--reps", type=int, metavar="N", help="measured rounds per cell")
    p.add_argument("--modes", default=None, metavar="store,dir",
                   help="torch:// store and/or aggregate_dir (default: both)")
    p.add_argument("--latency-via", choices=("proxy", "client"), default=None,
                   help="proxy: the embedded Toxiproxy latency toxic (default); client: the "
                   "counting store sleeps one round trip per request")
    p.add_argument("--value-sizes", type=_floats, metavar="MIB,..",
                   help="KVStore-level value sizes for the chunked path")
    p.add_argument("--value-latencies", type=_ints, metavar="MS,..",
                   help="one-way latencies for the KVStore-level chunked values")
    p.add_argument("--no-pipeline-chunked", action="store_true",
                   help="skip the pipeline checkpoint whose merged state is past 4 MiB")
    p.add_argument("--max-seconds", type=float, metavar="S",
                   help="stop starting new cells after this long (the rest is listed as skipped)")
    p.add_argument("--no-plots", action="store_true", help="write the CSV files only")
    p.add_argument("--project", action="store_true",
                   help="instead of the grid: measure the TCPStore's capacity, validate the "
                   "round's model against bench rounds, and project it to 256-16,384 ranks "
                   "(capacity.csv, validation.csv/.md, projection.csv/.md/.png)")
    p.add_argument("--capacity-connections", type=_ints, metavar="N,..",
                   help="with --project: concurrent client connections per capacity point")
    p.add_argument("--capacity-seconds", type=float, metavar="S",
                   help="with --project: the window of one capacity point")
    p.add_argument("--project-worlds", type=_ints, metavar="W,..",
                   help="with --project: projected world sizes (default 256..16384)")
    p.add_argument("--project-latencies", type=_floats, metavar="MS,..",
                   help="with --project: projected one-way latencies, ms (default 0.1,1,10)")
    p.add_argument("--fs-ops-per-s", type=float, metavar="N",
                   help="with --project: the shared filesystem's metadata capacity")


def run(args: argparse.Namespace) -> int:
    if args.bench != "aggregation":
        raise UsageError(f"unknown bench {args.bench!r}; choose one of {', '.join(SUBCOMMANDS)}")
    _plots_possible(args)
    if args.project:
        return _run_project(args)
    from zephon_chaos.bench.aggregation_report import NOTE, plot, table, write_csv
    from zephon_chaos.bench.grid import GridConfig, run_grid

    config = GridConfig.quick() if args.quick else GridConfig()
    _set_given(args, config, {**_ROUND_FIELDS, **_GRID_FIELDS})
    if args.modes is not None:
        config.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.no_pipeline_chunked:
        config.pipeline = False
    if config.via == "proxy":
        from zephon_chaos.bench.injected_latency import proxy_available

        why = proxy_available()
        if why is not None:
            print(f"note: {why}; latency is injected by the client instead")
            config.via = "client"
    try:
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if why := make_directory(args.out):
        raise UsageError(f"--out {args.out}: {why}; name a directory")
    from zephon_chaos.bench.machine import load_note

    print(f"zephon-chaos bench aggregation: {len(config.cells())} cells x {config.reps} rounds; "
          f"latency via {config.via}; {load_note()}\nnote: {NOTE}")
    began = time.monotonic()
    result = run_grid(config)
    files = write_csv(result, args.out)
    if not args.no_plots:
        files += plot(result, args.out)
    print()
    print(table(result))
    for what in result.skipped:
        print(f"skipped (past --max-seconds {config.max_seconds:.0f}): {what}")
    for problem in result.errors:
        print(f"error: {problem}")
    print(f"\nwrote {', '.join(str(f) for f in files)} in {time.monotonic() - began:.0f} s")
    return 1 if result.errors else 0


_ROUND_FIELDS: dict[str, str] = {
    "worlds": "worlds",
    "latencies": "latencies_ms",
    "reps": "reps",
    "latency_via": "via",
}
"""The options of measured rounds, ``{option: field}``: the grid's and the ``--project``
validation's alike."""
_GRID_FIELDS: dict[str, str] = {
    "value_sizes": "chunk_sizes_mib",
    "value_latencies": "chunk_latencies_ms",
    "max_seconds": "max_seconds",
}
_CAPACITY_FIELDS: dict[str, str] = {
    "capacity_connections": "connections",
    "capacity_seconds": "duration_s",
}
_PROJECTION_FIELDS: dict[str, str] = {
    "project_worlds": "worlds",
    "project_latencies": "one_way_ms",
    "fs_ops_per_s": "fs_ops_per_s",
}


def _set_given(args: argparse.Namespace, target: object, fields: dict[str, str]) -> None:
    """Copy each option given onto ``target``'s field (``{option: field}``): an option left
    out keeps the default of the configuration it would set."""
    for option, name in fields.items():
        value = getattr(args, option)
        if value is not None:
            setattr(target, name, value)


def project_config(args: argparse.Namespace) -> object:
    """The ``--project`` run the options name; a ``UsageError`` for a bad one."""
    from zephon_chaos.bench.project_run import ProjectRun

    cfg = ProjectRun(plots=not args.no_plots)
    _set_given(args, cfg.capacity, _CAPACITY_FIELDS)
    _set_given(args, cfg.validation, _ROUND_FIELDS)
    _set_given(args, cfg.projection, _PROJECTION_FIELDS)
    if args.modes is not None:
        cfg.validation.dir_cells = "dir" in args.modes
    problems = []
    for part in (cfg.capacity, cfg.validation):
        try:
            part.validate()  # type: ignore[attr-defined]
        except ValueError as exc:
            problems.append(str(exc))
    if not cfg.projection.worlds or any(w < 2 for w in cfg.projection.worlds):
        problems.append(f"projected worlds must be 2 or more, got {cfg.projection.worlds}")
    if any(not 0 <= x <= 1000 for x in cfg.projection.one_way_ms):
        problems.append("projected latencies must be 0..1000 ms")
    if cfg.projection.fs_ops_per_s <= 0:
        problems.append("the filesystem's capacity must be positive")
    if problems:
        raise UsageError("; ".join(problems))
    return cfg


def _plots_possible(args: argparse.Namespace) -> None:
    """Before measuring for minutes: plots need matplotlib (the ``explore`` extra)."""
    if not args.no_plots:
        from zephon_chaos.extras import PLOTS_INSTEAD, Extra, require

        require(Extra.MATPLOTLIB, "bench plots", PLOTS_INSTEAD)


def _run_project(args: argparse.Namespace) -> int:
    from zephon_chaos.bench.project_run import ProjectRun, run_project

    cfg = project_config(args)
    assert isinstance(cfg, ProjectRun)
    if why := make_directory(args.out):
        raise UsageError(f"--out {args.out}: {why}; name a directory")
    began = time.monotonic()
    result = run_project(cfg, args.out)
    print()
    print((args.out / "validation.md").read_text())
    print((args.out / "projection.md").read_text())
    print(f"wrote {', '.join(str(f) for f in result.files)} in {time.monotonic() - began:.0f} s")
    failed = [c for c in result.comparisons if c.error]
    return 1 if failed else 0
