"""Shared by ``run`` and ``replay``: load a scenario file, choose how to run it, run it once.

A file ``explore`` saved records how it was found (``Scenario.found``: tier, launch lane,
signature); both commands run it so unless ``--tier`` or ``--launch`` says otherwise, and
say which they used and why (:class:`RunSetting`).
"""

from __future__ import annotations

import argparse
import enum
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from zephon_chaos.closing import Closing
from zephon_chaos.commands import UsageError
from zephon_chaos.launch.launch_spec import DEFAULT_LAUNCH_LANE, LAUNCH_LANES, LaunchLane
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Found, Scenario


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a scenario JSON file")
    parser.add_argument(
        "--tier",
        default=None,
        help="inproc (rank threads, fast), torchrun (real groups), or auto: inproc when the "
        "scenario needs nothing only processes have (signals, launch paths, worker processes); "
        "default: the tier the file records it was found on, else auto",
    )
    add_launch_options(parser, default_launch=None)
    parser.add_argument(
        "--keep",
        metavar="DIR",
        default=None,
        help="keep the working files (data, records, checkpoints, logs) under DIR",
    )


LAUNCH_HELP = (
    "torchrun tier: warm (agent and workers forked from a process that imported torch "
    "already, ~10x faster) or cli (python -m torch.distributed.run per launch)"
)


def add_launch_options(parser: argparse.ArgumentParser, default_launch: str | None) -> None:
    """``--deadline`` and ``--launch``: every command that launches groups takes both.
    ``default_launch`` None: the lane the scenario file records, else the default lane."""
    parser.add_argument(
        "--deadline",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="the longest deadline of a launch: each gets what its reference run says it "
        "should take, at most this (default 120)",
    )
    default = (
        f"default {default_launch}"
        if default_launch is not None
        else f"default: the lane the file records it was found with, else {DEFAULT_LAUNCH_LANE}"
    )
    parser.add_argument("--launch", default=default_launch, help=f"{LAUNCH_HELP}; {default}")


class Source(enum.Enum):
    """Where a choice of :class:`RunSetting` came from; the value is what the line says."""

    OPTION = "given"
    FILE = "as found"
    DEFAULT = "default"


@dataclass(frozen=True)
class RunSetting:
    """How a scenario file is run: its tier and launch lane, and where each came from."""

    tier: str
    """A tier choice (``explore.tiers.TIER_CHOICES``): ``auto`` until :func:`prepare`
    resolves it for the scenario."""
    tier_from: Source
    launch: LaunchLane
    launch_from: Source

    def describe(self) -> str:
        """E.g. ``the torchrun tier (as found), launch warm (as found)``; in process the
        lane plays no part and goes unsaid."""
        lane = (
            f", launch {self.launch} ({self.launch_from.value})"
            if self.tier == "torchrun"
            else ""
        )
        return f"the {self.tier} tier ({self.tier_from.value}){lane}"


def choose(found: Found | None, tier: str | None, launch: str | None) -> RunSetting:
    """The options given win; else what the file records it was found with; else ``auto``
    and :data:`DEFAULT_LAUNCH_LANE`. A launch option is checked here (``UsageError``); a
    recorded one was checked when the file loaded."""
    if launch is not None:
        lane, lane_from = check_launch(launch), Source.OPTION
    elif found is not None:
        lane, lane_from = found.launch, Source.FILE
    else:
        lane, lane_from = DEFAULT_LAUNCH_LANE, Source.DEFAULT
    if tier is not None:
        return RunSetting(tier, Source.OPTION, lane, lane_from)
    if found is not None:
        return RunSetting(found.tier, Source.FILE, lane, lane_from)
    return RunSetting("auto", Source.DEFAULT, lane, lane_from)


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


def check_launch(choice: str) -> LaunchLane:
    for lane in LAUNCH_LANES:
        if choice == lane:
            return lane
    raise UsageError(f"--launch {choice!r}: choose one of {', '.join(LAUNCH_LANES)}")


def prepare(args: argparse.Namespace) -> tuple[Scenario, RunSetting]:
    """The scenario of ``FILE`` and how to run it, each checked (``UsageError``): the tier
    resolved (``auto``) and refused where threads cannot run the scenario."""
    scenario = load(args.file)
    setting = choose(scenario.found, args.tier, args.launch)
    tier = pick_tier(scenario, setting.tier)
    return scenario, RunSetting(tier, setting.tier_from, setting.launch, setting.launch_from)


def run_once(
    scenario: Scenario,
    tier: str,
    root: Path,
    deadline_s: float,
    launch: str = DEFAULT_LAUNCH_LANE,
    source: str | None = None,
) -> ScenarioOutcome:
    """One run; its replay line names ``source`` (the user's file), which outlives ``root``.
    A known hang ends when recognised, as in the exploration that found the scenario."""
    from zephon_chaos.explore.tiers import close_runner, make_runner

    runner = make_runner(tier, root, deadline_s, launch)
    try:
        outcome = runner.run(scenario)
    finally:
        close_runner(runner)
    if source is not None:
        outcome.scenario_file = Path(source).resolve()
    return outcome
