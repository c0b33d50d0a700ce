"""Shared by ``run`` and ``replay``: load a scenario file, pick a tier, run it once."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from zephon_chaos.closing import Closing
from zephon_chaos.commands import UsageError
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a scenario JSON file")
    parser.add_argument(
        "--tier",
        default="auto",
        help="inproc (rank threads, fast), torchrun (real groups), or auto: inproc when the "
        "scenario needs nothing only processes have (signals, launch paths, worker processes)",
    )
    add_launch_options(parser, default_launch="cli")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        default=None,
        help="keep the working files (data, records, checkpoints, logs) under DIR",
    )


LAUNCH_HELP = {
    "cli": "torchrun tier: cli (python -m torch.distributed.run per launch, the default) or "
    "warm (agent and workers forked from a process that imported torch already: faster)",
    "warm": "torchrun tier: warm (agent and workers forked from a process that imported "
    "torch already; the default, ~10x faster) or cli (python -m torch.distributed.run)",
}


def add_launch_options(parser: argparse.ArgumentParser, default_launch: str) -> None:
    """``--deadline`` and ``--launch``: every command that launches groups takes both."""
    parser.add_argument(
        "--deadline",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="deadline of each launch (default 120)",
    )
    parser.add_argument("--launch", default=default_launch, help=LAUNCH_HELP[default_launch])


def load(path: str) -> Scenario:
    """The scenario in ``path``; a bad file raises ``ScenarioError``, which ``cli`` answers
    with exit 2 as it does every ``InvalidInput``."""
    return Scenario.load(path)


def pick_tier(scenario: Scenario, choice: str) -> str:
    from zephon_chaos.explore.tiers import TIER_CHOICES, tier_for

    if choice not in TIER_CHOICES:
        raise UsageError(f"--tier {choice!r}: choose one of {', '.join(TIER_CHOICES)}")
    tier = tier_for(scenario, choice)
    if tier == "inproc":
        from zephon_chaos.inproc import inproc_refusal

        reason = inproc_refusal(scenario)
        if reason is not None:
            raise UsageError(f"the in-process tier cannot run this scenario: {reason}")
    return tier


class Workspace(Closing):
    """A private working folder: a temp dir removed afterwards, or ``--keep DIR``."""

    def __init__(self, keep: str | None) -> None:
        self.keep = Path(keep).absolute() if keep else None
        if self.keep is not None:
            self.keep.mkdir(parents=True, exist_ok=True)
            self.root = Path(tempfile.mkdtemp(prefix="zc-run-", dir=self.keep))
        else:
            self.root = Path(tempfile.mkdtemp(prefix="zc-run-"))

    def close(self) -> None:
        if self.keep is None:
            shutil.rmtree(self.root, ignore_errors=True)


def check_launch(choice: str) -> str:
    from zephon_chaos.explore.tiers import LAUNCHES

    if choice not in LAUNCHES:
        raise UsageError(f"--launch {choice!r}: choose one of {', '.join(LAUNCHES)}")
    return choice


def prepare(args: argparse.Namespace) -> tuple[Scenario, str, str]:
    """The scenario of ``FILE``, its tier and launch lane, each checked (``UsageError``)."""
    scenario = load(args.file)
    return scenario, pick_tier(scenario, args.tier), check_launch(args.launch)


def run_once(
    scenario: Scenario,
    tier: str,
    root: Path,
    deadline_s: float,
    launch: str = "cli",
    source: str | None = None,
) -> ScenarioOutcome:
    """One run; its replay line names ``source`` (the user's file), which outlives ``root``."""
    from zephon_chaos.explore.tiers import close_runner, make_runner

    runner = make_runner(tier, root, deadline_s, launch)
    try:
        outcome = runner.run(scenario)
    finally:
        close_runner(runner)
    if source is not None:
        outcome.scenario_file = Path(source).resolve()
    return outcome
