"""``zephon-chaos report merge DIR... [--out DIR]``: one report from the shards' reports.

Reads each DIR's ``summary.json`` (and the scenario files it names), never the markdown, and
writes ``summary.md``, ``summary.json``, the kept findings' files and the joined example
database under ``--out`` (:mod:`zephon_chaos.explore.merge`). Exit 0 once written; 2 when an
input is missing or corrupt, naming the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from zephon_chaos.commands import UsageError

DEFAULT_OUT = "chaos-report-merged"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    merge = actions.add_parser(
        "merge",
        help="merge the reports of an exploration's shards into one",
        description="Merge the reports of an exploration's shards (explore --shard i/n) into "
        "one: findings deduplicated by signature (the smallest scenario kept), coverage and "
        "each tier's time summed.",
    )
    merge.add_argument("reports", nargs="+", type=Path, metavar="DIR", help="a shard's report")
    merge.add_argument(
        "--out",
        type=Path,
        default=Path(DEFAULT_OUT),
        metavar="DIR",
        help=f"where the merged report goes (default ./{DEFAULT_OUT})",
    )


def run(args: argparse.Namespace) -> int:
    from zephon_chaos.explore.merge import merge, read_reports, write_merged
    from zephon_chaos.explore.summary_json import SUMMARY_JSON

    out: Path = args.out
    inputs = [p.resolve() for p in args.reports]
    if out.resolve() in inputs:
        raise UsageError(f"--out {out}: is one of the inputs; give a folder of its own")
    reusable = out.is_dir() and ((out / SUMMARY_JSON).exists() or not any(out.iterdir()))
    if out.exists() and not reusable:
        raise UsageError(
            f"--out {out}: exists and is not an empty folder or a report; give a new folder"
        )
    merged = merge(read_reports(list(args.reports)))  # a MergeError: exit 2, in ``cli``
    path = write_merged(merged, out)
    s = merged.summary
    print(f"merged {len(s.runs)} runs: {len(s.findings)} finding(s)")
    for f in s.findings:
        print(f"  {f.signature} [{f.label}] seen {f.seen}, kept from {f.shard}")
    if merged.missing_shards:
        print(f"shards missing: {', '.join(merged.missing_shards)}")
    print(f"report: {path}")
    return 0
