"""The search: rounds of a Hypothesis property over generated scenarios, under a time budget.

Each round is a ``@given`` test (phases reuse, generate, target, shrink): it replays what a
shared example database holds (``--database``, :mod:`zephon_chaos.explore.database`; none by
default), then generates scenarios until the first new failure, and Hypothesis's own shrinker
minimizes that one. A failure raises an exception type made for its signature; a signature
shrunk in an earlier round passes from then on, so rounds look for new kinds of failure. The
smallest failing scenario per signature is kept as it goes, so an interrupted or out-of-time
search still reports what it found.

Shrinking is paid for by searching: it may spend only what generating new scenarios has
earned (``SEARCH_SHARE``), and what it could not finish waits for the allowance to grow. A
torchrun finding that replays in process with the same signature is shrunk in process
(fast), and its minimal scenario is then confirmed on torchrun.

After the search, each finding is rerun (twice by default) and labeled reproducible or
flaky; with ``--tier both``, findings of the in-process tier are replayed on torchrun too.
"""

from __future__ import annotations

import contextlib
import enum
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from hypothesis import HealthCheck, Verbosity, given, seed, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis.strategies import SearchStrategy

from zephon_chaos.errors import Violation
from zephon_chaos.explore.activity import Activity, ActivityClock, shrink_allowance_s
from zephon_chaos.explore.database import (
    KeepKnown,
    SearchKey,
    close_database,
    database_key,
    open_database,
    shown,
)
from zephon_chaos.explore.findings import (
    CONFIRM_RUNS,
    Finding,
    FindingLabel,
    confirmation_order,
    discard,
    evidence,
)
from zephon_chaos.explore.polish import polish
from zephon_chaos.explore.progress import Progress
from zephon_chaos.explore.report import ExploreResult, TierStats, write_summary
from zephon_chaos.explore.shard import Shard, round_seed
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.explore.summary_json import write_summary_json
from zephon_chaos.explore.tiers import close_runner, make_runner
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies import scenarios

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
BOTH_INPROC_SHARE = 0.6
"""With ``--tier both``: the in-process search's share of the search time."""
SEARCH_SHARE: dict[str, float] = {"torchrun": 0.7, "inproc": 0.5}
"""The least share of a tier's search time that goes to new scenarios: shrinking (and the
confirmations it needs) may spend ``(1 - share) / share`` of each second spent generating,
as it accrues. In process a run takes a fraction of a second, so findings may shrink more."""
RUN_S_WEIGHT = 0.3
"""Weight of the newest run in a tier's running estimate of a run's seconds."""


class ShrinkStop(enum.Enum):
    """Why the shrinking of a finding stopped before Hypothesis was done with it."""

    BOUND = "its own shrinking time is up"
    ALLOWANCE = "the tier's shrink allowance is spent"
    DEADLINE = "the search is over"


class _EndShrinking(BaseException):
    """Raised inside the property to end a round's shrinking at once.

    Hypothesis treats ``Exception`` (and ``SystemExit``, ``GeneratorExit``) as failures to
    shrink; any other ``BaseException`` ends its run and propagates, as a KeyboardInterrupt
    does, without running further candidates.
    """

    def __init__(self, reason: ShrinkStop) -> None:
        super().__init__(reason.value)
        self.reason = reason


@dataclass(frozen=True)
class Judged:
    """One scenario judged during the search: whether it ran, and its signature if it failed."""

    ran: bool
    sig: str | None = None


class RouteCheck(enum.Enum):
    """A minimal scenario shrunk in process, rerun on its finding's own tier."""

    CONFIRMED = "fails alike"
    REFUTED = "does not fail alike"
    IN_PROCESS_ONLY = "first seen in process, and fails alike only there"
    NOT_RUN = "not run (out of time)"


class ScenarioViolation(Violation, AssertionError):
    """Raised inside the property for a failing scenario; a subclass per signature."""


_VIOLATION_TYPES: dict[str, type[ScenarioViolation]] = {}


def violation_type(sig: str) -> type[ScenarioViolation]:
    """One exception type per signature: Hypothesis shrinks each as a distinct bug."""
    if sig not in _VIOLATION_TYPES:
        name = "Violation_" + "".join(ch if ch.isalnum() else "_" for ch in sig)
        _VIOLATION_TYPES[sig] = type(name, (ScenarioViolation,), {})
    return _VIOLATION_TYPES[sig]


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
    launch: str = "warm"
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


def reserve_s(budget_s: float) -> float:
    """Time kept after the search for confirmation reruns and the report."""
    return min(max(0.1 * budget_s, 10.0), 90.0, 0.5 * budget_s)


class Explorer:
    def __init__(self, config: ExploreConfig) -> None:
        self.config = config
        self.result = ExploreResult(
            report_dir=config.report_dir,
            budget_s=config.budget_s,
            tier=config.tier,
            seed=config.seed,
            max_world=config.max_world,
            plant=config.plant,
            shard=str(config.shard) if config.shard.sharded else None,
            database=None if config.database is None else shown(config.database),
        )
        opened = open_database(config.database, config.report_dir)  # DatabaseError: no start
        self._database = None if opened is None else KeepKnown(opened)
        """Shared with other runs; Hypothesis replays what it holds first in every round."""
        self.findings: dict[str, Finding] = {}
        self.settled: set[str] = set()
        self.runners: dict[str, ScenarioRunner] = {}
        self._work = Path(tempfile.mkdtemp(prefix="zc-explore-"))
        self._started = 0.0
        self._end = 0.0
        self._cut = False
        self._launch_deadline = config.deadline_s
        self._last: tuple[Scenario, ScenarioOutcome] | None = None
        self.progress: Progress | None = None
        self._clock = ActivityClock()
        self._confirming = False
        self._run_s: dict[str, float] = {}
        """Per runner tier: a running estimate of one scenario's seconds."""
        self._shrink_began: dict[str, float] = {}
        self._polished_s: dict[str, float] = {}
        self._routes: dict[str, str] = {}
        """Per signature: the tier its scenarios are shrunk on."""
        self._tier_best: dict[str, tuple[Scenario, str]] = {}
        """A finding shrunk in process: its smallest scenario that failed on its own tier."""
        self._pending: list[str] = []
        """Findings whose shrinking is unfinished: the allowance ran out, or they were first
        seen while another was shrinking. Polished as the allowance grows."""

    # ---- the whole run -----------------------------------------------------------------
    def run(self) -> ExploreResult:
        cfg = self.config
        self._started = time.monotonic()
        end = self._end = self._started + cfg.budget_s
        search_end = end - reserve_s(cfg.budget_s)
        self.progress = Progress(end, cfg.stream, cfg.progress_interval_s).start()
        try:
            if cfg.tier == "both":
                split = self._started + BOTH_INPROC_SHARE * (search_end - self._started)
                self._search("inproc", split)
                self._search("torchrun", search_end)
            else:
                self._search(cfg.tier, search_end)
            self.progress.phase = "confirming"
            self._confirming = True
            try:
                self._confirm(end)
            finally:
                self._confirming = False
                self._clock.stop()
        except KeyboardInterrupt:
            self.result.interrupted = True
        finally:
            self.progress.phase = "writing the report"
            self._finish()
        return self.result

    def _finish(self) -> None:
        assert self.progress is not None
        try:
            for runner in self.runners.values():
                with contextlib.suppress(Exception):
                    close_runner(runner)
            self.result.elapsed_s = time.monotonic() - self._started
            self.result.findings = sorted(
                self.findings.values(), key=lambda f: (f.known, f.first_seen_s)
            )
            self._write_report()
        finally:
            self.progress.stop()
            shutil.rmtree(self._work, ignore_errors=True)
            close_database(self._database)

    def _write_report(self) -> None:
        folder = self.config.report_dir / "findings"
        for finding in self.result.findings:
            finding.save(folder)
        from zephon_chaos.explore.timeline import plot_timeline

        shown: tuple[Scenario, ScenarioOutcome | None, str] | None = None
        if self.result.findings:
            first = self.result.findings[0]
            shown = (first.scenario, first.outcome, first.signature)
        elif self._last is not None:
            shown = (self._last[0], self._last[1], "a passing scenario of this exploration")
        if shown is not None:
            self.result.timeline = plot_timeline(
                shown[0], self.config.report_dir / "timeline.png", shown[1], title=shown[2]
            )
        write_summary(self.result)
        write_summary_json(self.result)
        for finding in self.result.findings:
            if finding.outcome is not None:
                discard(finding.outcome)

    # ---- searching -----------------------------------------------------------------------
    def _runner(self, tier: str) -> ScenarioRunner:
        if tier not in self.runners:
            runner = make_runner(
                tier, self._work / tier, self.config.deadline_s, self.config.launch
            )
            runner.deadline_cap = self._deadline_cap
            self.runners[tier] = runner
        return self.runners[tier]

    def _deadline_cap(self) -> float:
        """What is left of the budget (plus a grace) for the next launch; noted when it cuts."""
        left = self._end + GRACE_S - time.monotonic()
        if left < self._launch_deadline:
            self._cut = True
        return max(left, 1.0)

    def _run(self, runner: ScenarioRunner, scenario: Scenario) -> ScenarioOutcome | None:
        """Run ``scenario``; None if a launch hit the budget's end rather than its deadline."""
        self._cut = False
        p = scenario.pipeline
        slow = p.runner == "process" or p.mtp_mode
        runner.deadline_s = self.config.deadline_s * (WORKER_PROCESS_FACTOR if slow else 1)
        self._launch_deadline = runner.deadline_s
        tier = self._tier_of(runner)
        if self._confirming:  # the confirmations after the search: charged to the run's tier
            self._clock.switch(self._stats(tier), Activity.CONFIRM)
        began = time.monotonic()
        outcome = runner.run(scenario)
        took = time.monotonic() - began
        last = self._run_s.get(tier)
        self._run_s[tier] = took if last is None else last + RUN_S_WEIGHT * (took - last)
        if self._cut and any(
            r is not None and r.result.timed_out for r in [outcome.reference, *outcome.phases]
        ):
            discard(outcome)
            note = "scenarios cut short by the end of the budget were dropped"
            if note not in self.result.notes:
                self.result.notes.append(note)
            return None
        return outcome

    def _search(self, tier: str, deadline: float) -> None:
        assert self.progress is not None
        cfg = self.config
        self.progress.tier = tier
        self.progress.phase = "searching"
        stats = self._stats(tier)
        runner = self._runner(tier)
        began = self._clock.switch(stats, Activity.SEARCH)
        round_no = 0
        pending_before = len(self._pending)
        try:
            while time.monotonic() < deadline and not self._goal_met():
                round_no += 1
                steering = RoundSteering(self.result.coverage, tier, cfg, round_no)
                share = DOWNSTREAM_AIM_SHARE if cfg.profile == "downstream" else AIM_SHARE
                aims = steering.aims() if stats.aimed_s < share * stats.search_s else ()
                strategy = scenarios(
                    tier=tier,  # type: ignore[arg-type]
                    max_world=cfg.max_world,
                    max_phases=cfg.max_phases,
                    plant=cfg.plant,
                    store_faults=cfg.store_faults,
                    profile=cfg.profile,  # type: ignore[arg-type]
                    aims=aims,
                    aim_odds=AIMED_ODDS,
                )
                examples = (AIMED_ROUND_EXAMPLES if aims else ROUND_EXAMPLES)[tier]
                self._clock.flush()
                searched = stats.search_s
                self._round(
                    tier, runner, strategy, steering, round_no, deadline, stats, examples, not aims
                )
                if aims:
                    self._clock.flush()
                    stats.aimed_s += stats.search_s - searched
                    stats.aimed_rounds += 1
                self._shrink_pending(deadline, stats)
            self._settle_routes(stats)
            if self._goal_met():
                self.result.notes.append(f"the {tier} search ended early: its goal was met")
            unfinished = len(self._pending) - pending_before
            if unfinished > 0:
                self.result.notes.append(
                    f"{unfinished} {tier} finding(s) left partly shrunk: the shrink allowance "
                    f"(at least {100 * self._share(tier):.0f}% of the search for new "
                    "scenarios) ran out"
                )
        finally:
            stats.seconds += self._clock.stop() - began
            del self._pending[pending_before:]

    def _round(
        self,
        tier: str,
        runner: ScenarioRunner,
        strategy: SearchStrategy[Scenario],
        steering: RoundSteering,
        round_no: int,
        deadline: float,
        stats: TierStats,
        examples: int,
        shared: bool = True,
    ) -> None:
        """One Hypothesis run: new scenarios until the first new failure, then shrinking it.

        ``report_multiple_bugs=False`` makes Hypothesis end its generate phase at the first
        failing scenario (its engine's ``should_generate_more``; the 10 s of further
        generation it allows with several bugs would blur the phases). A hill climb of the
        target phase under way may still try a few candidates: they are not run (without
        their score it climbs nowhere; the next round searches on). Hypothesis's shrink
        phase begins by replaying the failure: from that call on, every call is shrinking,
        charged so and governed by the shrink allowance. While shrinking, only that
        failure's signature raises (Hypothesis would otherwise slip to any smaller failure);
        another new one seen meanwhile keeps its smallest scenario and is polished later.
        """
        raised: list[str] = []
        failing: list[Scenario] = []
        shrinking: list[bool] = []

        def keep(flag: bool, save: bool = True) -> None:
            """Whether Hypothesis may delete the call's example (if it replayed one), and save
            it (as it does for any call that raises)."""
            if self._database is not None:
                self._database.keep, self._database.save_ok = flag, save

        @settings(
            max_examples=examples,
            deadline=None,
            # An aimed round neither replays nor saves: its draws mean other scenarios than a
            # plain round's, so a plain round's failure replayed here would pass and be
            # deleted from the shared database, and one saved here would mislead plain rounds.
            database=self._database if shared else None,
            derandomize=False,
            phases=[
                HypothesisPhase.reuse,  # the shared database's failures first (none without)
                HypothesisPhase.generate,
                HypothesisPhase.target,
                HypothesisPhase.shrink,
            ],
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
        )
        @seed(round_seed(self.config.seed, self.config.shard, round_no, tier))
        @given(strategy)
        def prop(scenario: Scenario) -> None:
            keep(False)
            if raised:
                if not shrinking:
                    if scenario != failing[0]:
                        return  # the tail of a hill climb, after the round's failure: not run
                    shrinking.append(True)  # the shrink phase's replay: it has just failed
                    self._shrink_began[raised[0]] = self._clock.switch(stats, Activity.SHRINK)
                    raise violation_type(raised[0])(raised[0])
                try:
                    self._shrink_step(tier, runner, scenario, deadline, stats, raised[0])
                except _EndShrinking:
                    keep(True, save=False)  # a candidate never run: no failure to share
                    raise
                return
            # A torchrun round may last many minutes: unfinished shrinking goes on as soon
            # as generating has earned it, not at the round's end only.
            self._shrink_pending(deadline, stats)
            judged = self._judge(tier, runner, scenario, deadline, stats)
            sig = judged.sig
            steering.observe(scenario)  # target(): toward cells this exploration reached least
            if sig is None or sig in self.settled:
                keep(not judged.ran or sig is not None)  # a replay not run, or held: not fixed
                return
            raised.append(sig)
            failing.append(scenario)
            raise violation_type(sig)(sig)

        # Every round, shard and process saves under one key (not Hypothesis's digest of this
        # nested function): what a round saved, any round anywhere replays.
        key = self._database_key(tier)
        prop._hypothesis_internal_database_key = key  # type: ignore[attr-defined]

        keep(False)
        stop: ShrinkStop | None = None
        try:
            with steering:  # declares the tier's cells; measures Zephon's code on some scenarios
                prop()
        except _EndShrinking as end:
            stop = end.reason
        except Exception:  # Hypothesis's report of the failure this explorer holds already
            pass
        if not raised:
            return
        sig = raised[0]
        self.settled.add(sig)
        if not shrinking:  # Hypothesis ended without shrinking: polishing is all of it
            self._shrink_began[sig] = self._clock.switch(stats, Activity.SHRINK)
        try:
            if stop is ShrinkStop.ALLOWANCE and self._polishable(sig):
                self._pending.insert(0, sig)
            else:
                self._polish(sig, deadline, stats)
        finally:
            self._clock.switch(stats, Activity.SEARCH)
            if self.progress is not None:
                self.progress.phase = "searching"

    def _database_key(self, tier: str) -> bytes:
        cfg = self.config
        return database_key(
            SearchKey(
                tier=tier,
                max_world=cfg.max_world,
                max_phases=cfg.max_phases,
                plant=cfg.plant,
                store_faults=cfg.store_faults,
                profile=cfg.profile,
            )
        )

    def _shrink_step(
        self,
        tier: str,
        runner: ScenarioRunner,
        scenario: Scenario,
        deadline: float,
        stats: TierStats,
        target: str,
    ) -> None:
        """One candidate of Hypothesis's shrinker: raises if it still fails as ``target``."""
        stop = self._shrunk_enough(target, deadline, stats)
        if stop is not None:
            raise _EndShrinking(stop)
        route = self._route(target, deadline, stats)
        if route is None:
            raise _EndShrinking(ShrinkStop.ALLOWANCE)
        if route != tier:
            if not _expressible_in_process(scenario):
                return  # a candidate threads cannot run: not a smaller failure here
            runner = self._runner(route)
        judged = self._judge(route, runner, scenario, deadline, stats)
        if not judged.ran:
            raise _EndShrinking(ShrinkStop.DEADLINE)
        if judged.sig == target:
            raise violation_type(target)(target)
        self._note_unshrunk(judged.sig)

    def _shrunk_enough(
        self, sig: str, deadline: float, stats: TierStats | None = None
    ) -> ShrinkStop | None:
        """Why Hypothesis's shrinking of ``sig`` ends now, or None to go on: past its own
        time (``shrink_s``, less for a known defect), the search's deadline, or the tier's
        shrink allowance (not enough left for one more run on its route)."""
        finding = self.findings[sig]
        bound = self.config.shrink_s * (KNOWN_SHRINK_SHARE if finding.known else 1.0)
        began = self._shrink_began.get(sig, self._started + finding.first_seen_s)
        now = time.monotonic()
        if now - began > bound:
            return ShrinkStop.BOUND
        if now >= deadline or self._goal_met():
            return ShrinkStop.DEADLINE
        if stats is not None and not self._affordable(stats, self._routes.get(sig, finding.tier)):
            return ShrinkStop.ALLOWANCE
        return None

    # ---- the shrink allowance, routes and polishing --------------------------------------
    def _share(self, tier: str) -> float:
        share = self.config.search_share
        return share if share is not None else SEARCH_SHARE.get(tier, SEARCH_SHARE["torchrun"])

    def _allowance_s(self, stats: TierStats) -> float:
        """Seconds of shrinking ``stats``'s search has earned and not spent."""
        self._clock.flush()
        spent = stats.shrink_s + stats.confirm_s  # the search's confirmations serve shrinking
        return shrink_allowance_s(stats.search_s, spent, self._share(stats.tier))

    def _affordable(self, stats: TierStats, run_tier: str) -> bool:
        """Whether one more run on ``run_tier`` fits the allowance (by its running estimate)."""
        left = self._allowance_s(stats)
        return left > 0 and left >= self._run_s.get(run_tier, 0.0)

    def _polishable(self, sig: str) -> bool:
        """Harness errors and known defects (whose minimal scenarios are pinned by strict
        xfails) are not worth the polishing time of a budget."""
        return not self.findings[sig].harness and not self.findings[sig].known

    def _note_unshrunk(self, sig: str | None) -> None:
        """A new failure seen while another shrinks: polished later, as the allowance allows."""
        if (
            sig is not None
            and sig not in self.settled
            and sig not in self._pending
            and self._polishable(sig)
        ):
            self._pending.append(sig)

    def _route(self, sig: str, deadline: float, stats: TierStats) -> str | None:
        """The tier ``sig`` shrinks on: in process for a torchrun finding that replays there
        with the same signature, else its own. None: not decided (no allowance or time).

        Decided once its smallest scenario is expressible in process (threads refuse what
        only processes do): from then on, candidates threads cannot run are passed over."""
        route = self._routes.get(sig)
        if route is not None:
            return route
        finding = self.findings[sig]
        route = finding.tier
        if finding.tier == "torchrun" and not finding.harness:
            if not _expressible_in_process(finding.scenario):
                finding.shrunk_on = route
                return route  # undecided: a smaller failing scenario may be expressible
            if not self._affordable(stats, "inproc"):
                return None
            best = (finding.scenario, finding.report)
            inproc = self._runner("inproc")
            judged = self._judge("inproc", inproc, finding.scenario, deadline, stats)
            if not judged.ran:
                return None
            if judged.sig == sig:
                route = "inproc"
                self._tier_best[sig] = best
        self._routes[sig] = route
        finding.shrunk_on = route
        return route

    def _polish(self, sig: str, deadline: float, stats: TierStats) -> None:
        """The domain-aware pass after Hypothesis's shrinking, within the finding's own time
        (``POLISH_S``) and the tier's allowance; cut short by the allowance, it waits.
        Call it while the clock charges shrinking."""
        if sig in self._pending:
            self._pending.remove(sig)
        if not self._polishable(sig):
            self._shrunk(sig, deadline, stats)
            return
        route = self._route(sig, deadline, stats)
        if route is None:
            self._pending.append(sig)
            return
        own_left = POLISH_S - self._polished_s.get(sig, 0.0)
        allowed = self._allowance_s(stats) - self._run_s.get(route, 0.0)
        if own_left <= 0:
            self._shrunk(sig, deadline, stats)
            return
        if allowed <= 0:
            self._pending.append(sig)
            return
        assert self.progress is not None
        self.progress.phase = f"polishing {sig}"
        began = time.monotonic()
        until = min(deadline, began + min(own_left, allowed))

        def judge(s: Scenario) -> str | None:
            # Polishing may make a torchrun finding expressible in process: it goes on there.
            on = self._route(sig, deadline, stats) or self.findings[sig].tier
            if on != self.findings[sig].tier and not _expressible_in_process(s):
                return None
            return self._check(on, self._runner(on), s, deadline, stats)

        polish(self.findings[sig].scenario, sig, judge, until)
        now = time.monotonic()
        self._polished_s[sig] = self._polished_s.get(sig, 0.0) + now - began
        if now < until or self._polished_s[sig] >= POLISH_S:
            self._shrunk(sig, deadline, stats)  # no simpler candidate fails, or its time is up
        elif now < deadline:
            self._pending.append(sig)

    def _shrink_pending(self, deadline: float, stats: TierStats) -> None:
        """Go on polishing unfinished findings with what searching has earned since."""
        for sig in list(self._pending):
            if time.monotonic() >= deadline or not self._affordable(
                stats, self._routes.get(sig, self.findings[sig].tier)
            ):
                return
            with self._clock.during(stats, Activity.SHRINK):
                self._polish(sig, deadline, stats)
            assert self.progress is not None
            self.progress.phase = "searching"
            if sig in self._pending:
                return  # the allowance ran out again

    def _shrunk(self, sig: str, deadline: float, stats: TierStats) -> None:
        """Shrinking of ``sig`` is over: a minimum found in process is confirmed on its tier."""
        finding = self.findings[sig]
        route = self._routes.get(sig, finding.tier)
        if route != finding.tier and self._confirm_route(sig, stats) is RouteCheck.REFUTED:
            self._polish(sig, deadline, stats)  # on its own tier now, within the allowance
            return
        finding.shrunk_s = self._elapsed()

    def _confirm_route(self, sig: str, stats: TierStats) -> RouteCheck:
        """Rerun a finding shrunk in process on its own tier; if it does not fail alike there,
        go back to its smallest scenario that did, and shrink on that tier from then on. One
        first seen in process (while another shrank there) has none: it is an in-process
        finding then."""
        finding = self.findings[sig]
        route = self._routes[sig]
        assert self.progress is not None
        self.progress.phase = f"confirming {sig} on {finding.tier}"
        with self._clock.during(stats, Activity.CONFIRM):
            judged = self._judge(
                finding.tier, self._runner(finding.tier), finding.scenario, self._end, stats
            )
        if not judged.ran:
            return RouteCheck.NOT_RUN
        self._routes[sig] = finding.tier  # its shrinking in process is over
        best = self._tier_best.pop(sig, None)
        if judged.sig == sig:
            stats.shrunk_in_process += 1
            return RouteCheck.CONFIRMED
        if best is None:
            self.result.notes.append(
                f"{sig}: first seen in process while another finding shrank there; its "
                f"minimal scenario on {finding.tier}: {judged.sig or 'passed'}, so it is "
                "reported as an in-process finding"
            )
            self._routes[sig] = finding.tier = route
            return RouteCheck.IN_PROCESS_ONLY
        scenario, report = best
        if finding.outcome is not None:
            discard(finding.outcome)
            finding.outcome = None
        finding.scenario, finding.report = scenario, report
        self._routes[sig] = finding.shrunk_on = finding.tier
        self.result.notes.append(
            f"{sig}: its minimal scenario shrunk in process did not fail alike on "
            f"{finding.tier} ({judged.sig or 'passed'}); shrunk on {finding.tier} instead"
        )
        return RouteCheck.REFUTED

    def _settle_routes(self, stats: TierStats) -> None:
        """At the end of a search: findings shrunk in process but unfinished are confirmed on
        their own tier too, so the scenario reported is one that fails there."""
        for sig in [s for s, route in self._routes.items() if route != self.findings[s].tier]:
            self._confirm_route(sig, stats)

    # ---- running one scenario ------------------------------------------------------------
    def _stats(self, tier: str) -> TierStats:
        return self.result.tiers.setdefault(tier, TierStats(tier))

    def _tier_of(self, runner: ScenarioRunner) -> str:
        return next((t for t, r in self.runners.items() if r is runner), "unknown")

    def _count(self, tier: str, stats: TierStats) -> None:
        """One more run of ``stats``'s search, on ``tier``'s runner."""
        if tier == stats.tier:
            stats.scenarios += 1
        else:
            stats.in_process_runs += 1
        if self._clock.activity is Activity.SEARCH:
            stats.new_scenarios += 1
        assert self.progress is not None
        self.progress.scenarios += 1

    def _check(
        self,
        tier: str,
        runner: ScenarioRunner,
        scenario: Scenario,
        deadline: float,
        stats: TierStats,
    ) -> str | None:
        """Run one scenario; its signature if it fails (None past the deadline or if ok)."""
        return self._judge(tier, runner, scenario, deadline, stats).sig

    def _judge(
        self,
        tier: str,
        runner: ScenarioRunner,
        scenario: Scenario,
        deadline: float,
        stats: TierStats,
    ) -> Judged:
        """Run one scenario on ``tier``'s ``runner`` for ``stats``'s search, and judge it."""
        if time.monotonic() >= deadline or self._goal_met():
            return Judged(ran=False)
        assert self.progress is not None
        try:
            judged = self._run(runner, scenario)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            self._count(tier, stats)
            return Judged(ran=True, sig=self._harness_error(tier, scenario, exc))
        if judged is None:
            return Judged(ran=False)
        outcome = judged
        self._count(tier, stats)
        self.result.coverage.add(scenario, outcome, tier)
        self.result.liveness.add(outcome)
        if len(runner.reference_cache) > 256:
            runner.reference_cache.clear()
        sig = signature(outcome)
        if sig is None:
            if self._last is not None:
                discard(self._last[1])
            self._last = (scenario, outcome)
            return Judged(ran=True)
        finding = self.findings.get(sig)
        if finding is None:
            self.findings[sig] = finding = Finding(
                signature=sig,
                tier=stats.tier,
                scenario=scenario,
                report=evidence(outcome),
                first_seen_s=time.monotonic() - self._started,
                outcome=outcome,
            )
            if tier != stats.tier:
                # First seen in process while a finding of this search shrank there: a finding
                # of the search's tier, shrunk in process and then confirmed like the other.
                self._routes[sig] = finding.shrunk_on = tier
            self.progress.findings = len(self.findings)
            self.progress.note(f"finding: {sig} in {scenario.summary()} (shrinking)")
        elif tier != finding.tier and self._routes.get(sig) != tier:
            finding.seen += 1  # seen on another tier: it keeps a scenario its own tier failed
            discard(outcome)
        elif not finding.offer(scenario, outcome):
            discard(outcome)
        elif tier == finding.tier and sig in self._tier_best:
            self._tier_best[sig] = (scenario, finding.report)  # smaller, and failed on its tier
        return Judged(ran=True, sig=sig)

    def _harness_error(self, tier: str, scenario: Scenario, exc: Exception) -> str:
        """A scenario the harness itself could not run: a harness problem, never a violation
        (its finding is labelled so and not rerun)."""
        sig = f"{HARNESS_AREA}.{type(exc).__name__}.no-resume.no-resume"
        text = f"the harness failed to run the scenario:\n{traceback.format_exc()}"
        finding = self.findings.get(sig)
        if finding is None:
            self.findings[sig] = Finding(
                sig, tier, scenario, text, time.monotonic() - self._started
            )
            assert self.progress is not None
            self.progress.findings = len(self.findings)
            self.progress.note(f"harness problem: {sig}: {exc}")
        else:
            finding.seen += 1
        return sig

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _goal_met(self) -> bool:
        stop = self.config.stop_when
        return stop is not None and stop(self.findings)

    # ---- confirming ----------------------------------------------------------------------
    def _confirm(self, end: float) -> None:
        cfg = self.config
        for finding in confirmation_order(self.findings.values()):
            if finding.harness:
                continue  # our own problem: labelled so, reported apart, not rerun
            if time.monotonic() >= end:
                finding.label = FindingLabel.OUT_OF_TIME
                continue
            assert self.progress is not None
            self.progress.tier = finding.tier
            runner = self._runner(finding.tier)
            finding.confirm(lambda s: self._run(runner, s), cfg.confirm_runs)  # noqa: B023
            reruns = ", ".join(finding.reruns)
            self.progress.note(f"{finding.signature}: {finding.label} ({reruns})")
            if cfg.tier == "both" and finding.tier == "inproc":
                if time.monotonic() >= end:
                    finding.confirmed_on["torchrun"] = "not replayed (out of time)"
                    continue
                self.progress.tier = "torchrun"
                outcome = self._run(self._runner("torchrun"), finding.scenario)
                if outcome is None:
                    finding.confirmed_on["torchrun"] = "not replayed (out of time)"
                    continue
                finding.confirmed_on["torchrun"] = signature(outcome) or "passed"
                discard(outcome)


def _expressible_in_process(scenario: Scenario) -> bool:
    """Whether rank threads can run ``scenario`` faithfully (the in-process tier's refusal)."""
    from zephon_chaos.inproc import inproc_refusal

    return inproc_refusal(scenario) is None
