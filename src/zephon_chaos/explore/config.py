"""What an exploration is asked to do (``ExploreConfig``) and the budget's fixed shares.

The numbers are the explorer's policy, measured and explained where each is defined; the
search (:mod:`.search`), its shrinking (:mod:`.shrinking`) and its judging (:mod:`.judging`)
read them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from zephon_chaos.explore.findings import CONFIRM_RUNS, Finding
from zephon_chaos.explore.shard import Shard, tier_order
from zephon_chaos.launch.launch_spec import DEFAULT_LAUNCH_LANE, LaunchLane
from zephon_chaos.scenario import Scenario

ROUND_EXAMPLES: dict[str, int] = {"inproc": 40, "torchrun": 6}
"""New scenarios a round may generate (it ends sooner at its first new failure): rounds are
where aimed and plain searching take turns, so a torchrun round stays a few minutes."""
AIMED_ROUND_EXAMPLES: dict[str, int] = {"inproc": 15, "torchrun": 4}
AIM_SHARE = 0.5
"""The most of a tier's search time that goes to rounds aimed at fault cells no tier reached
yet (``explore.steer``): an aimed scenario carries failing rounds, about twice as slow as a
plain one, and the plain rounds are where the rest of the space is searched."""
DOWNSTREAM_AIM_SHARE = 0.2
"""With ``--profile downstream``: an aimed launch cannot keep the downstream's worker processes
or ``mtp_mode`` (their child writes the round, not the faulted rank), so aiming would pull
the search away from what that profile is for."""
AIMED_ODDS = (1, 7)
"""Free and aimed scenarios in an aimed round: nearly all aimed, yet "free" to shrink to."""
WORKER_PROCESS_FACTOR = 3
"""Launches whose pipelines start worker processes (``runner: process``, ``mtp_mode``) get
this many times the deadline: each worker imports torch (60-75 s a launch measured here)."""
GRACE_S = 5.0
"""A launch may end this long after the budget: its deadline is capped at the budget's end."""
POLISH_S = 120.0
"""At most this long for the domain-aware pass after Hypothesis's shrinking, per finding."""
SHRINK_S = 60.0
"""At most this long for Hypothesis's shrinking of one finding; polishing takes over then."""
KNOWN_SHRINK_SHARE = 0.25
"""A known defect's share of ``SHRINK_S``: its minimal scenario is pinned by a strict xfail."""
KNOWN_CONFIRM_RUNS = 1
"""Confirmation reruns of a known defect's finding: confirmed once per run, since its label
decides nothing (``findings.confirmation_order``) and a known hang's rerun is a hang."""
BOTH_INPROC_SHARE = 0.6
"""With ``--tier both``: the in-process search's share of the search time."""
SEARCH_SHARE: dict[str, float] = {"torchrun": 0.7, "inproc": 0.5}
"""The least share of a tier's search time that goes to new scenarios: shrinking (and the
confirmations it needs) may spend ``(1 - share) / share`` of each second spent generating,
as it accrues. In process a run takes a fraction of a second, so findings may shrink more."""
RUN_S_WEIGHT = 0.3
"""Weight of the newest run in a tier's running estimate of a run's seconds."""


@dataclass
class ExploreConfig:
    budget_s: float
    report_dir: Path
    tier: str = "inproc"
    seed: int = 0
    max_world: int = 4
    max_phases: int = 5
    plant: str | None = None
    deadline_s: float = 120.0
    launch: LaunchLane = DEFAULT_LAUNCH_LANE
    """How the torchrun tier starts groups: ``warm`` (forked, fast) or ``cli``."""
    store_faults: bool = False
    """Faults on the ranks' links to the store, with retry policies (both tiers)."""
    profile: str = "default"
    """Odds of the generated pipelines (``strategies.PROFILES``): ``downstream`` makes what
    torchtitan-zephon runs the common case on torchrun."""
    confirm_runs: int = CONFIRM_RUNS
    stream: TextIO | None = None
    progress_interval_s: float = 15.0
    shrink_s: float = SHRINK_S
    search_share: float | None = None
    """The least share of each tier's search time for new scenarios (None: ``SEARCH_SHARE``)."""
    stop_when: Callable[[dict[str, Finding]], bool] | None = None
    """Checked after each round: True ends the search early (tests stop once they have theirs)."""
    shard: Shard = field(default_factory=Shard)
    """This run's shard of a run split across runners: its rounds' seeds (``explore.shard``)."""
    database: str | None = None
    """Where failing scenarios are shared with other runs (``explore.database``); None: none."""
    aim: bool = True
    """Spend up to ``AIM_SHARE`` of each tier's search on rounds aimed at the fault cells no
    tier reached yet (``explore.steer``); off: plain draws steered by ``target()`` only."""

    @property
    def left_to(self) -> str | None:
        """The tier of ``--tier both`` that this shard leaves to its sibling shards (one tier
        a shard, ``explore.shard.tier_order``); None where it searches both."""
        return tier_order(self.shard)[1] if self.tier == "both" and self.shard.sharded else None


def flat_deadline_s(deadline_s: float, scenario: Scenario) -> float:
    """The ceiling of a scenario's launch deadlines: ``--deadline``, times
    ``WORKER_PROCESS_FACTOR`` where its pipelines start worker processes."""
    p = scenario.pipeline
    slow = p.runner == "process" or p.mtp_mode
    return deadline_s * (WORKER_PROCESS_FACTOR if slow else 1)


def reserve_s(budget_s: float) -> float:
    """Time kept after the search for confirmation reruns and the report."""
    return min(max(0.1 * budget_s, 10.0), 90.0, 0.5 * budget_s)
