"""``zephon-chaos clean [--dry-run]``: remove what crashed runs left behind, and say what.

Processes of crashed pytest sessions (their ledgers under ``<temp>/zephon-chaos-<uid>``), group
processes recording under the temp folder whose launcher is gone, the ports they hold, the
folders of crashed sessions, ``zephon*``/``torchelastic_*``/``zc-*`` temp entries and
``/dev/shm`` segments that nothing live holds. What a live session lists or owns, or a live
process holds, is never touched.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from zephon_chaos.commands import UsageError
from zephon_chaos.hygiene.owner import UnsafeDirectory, private_root, temp_base
from zephon_chaos.hygiene.reaper import reap


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would be removed; remove nothing",
    )
    parser.add_argument(
        "--temp-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the temp folder the runs used (default: $TMPDIR, else the system's)",
    )


def run(args: argparse.Namespace) -> int:
    temp = args.temp_dir or temp_base()
    if not temp.is_dir():
        raise UsageError(f"--temp-dir {temp} is not a directory")
    try:
        root = private_root(temp)
    except UnsafeDirectory as exc:
        raise UsageError(str(exc)) from exc
    done = reap(root, thorough=True, dry_run=args.dry_run, temp_dir=temp)
    print(done.describe())
    return 1 if done.problems else 0
