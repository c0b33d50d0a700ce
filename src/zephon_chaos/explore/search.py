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
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, Verbosity, given, seed, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis.errors import FlakyFailure, Unsatisfiable
from hypothesis.strategies import SearchStrategy

from zephon_chaos.explore.activity import Activity
from zephon_chaos.explore.config import (
    AIM_SHARE,
    AIMED_ODDS,
    AIMED_ROUND_EXAMPLES,
    BOTH_INPROC_SHARE,
    DOWNSTREAM_AIM_SHARE,
    GRACE_S,
    ROUND_EXAMPLES,
    RUN_S_WEIGHT,
    ExploreConfig,
    flat_deadline_s,
    reserve_s,
)
from zephon_chaos.explore.database import (
    KeepKnown,
    PinnedKey,
    SearchKey,
    close_database,
    database_key,
    open_database,
    shown,
)
from zephon_chaos.explore.findings import Finding, discard
from zephon_chaos.explore.judged import (
    EndShrinking,
    ScenarioViolation,
    ShrinkStop,
    violation_type,
)
from zephon_chaos.explore.judging import Judge
from zephon_chaos.explore.progress import Progress
from zephon_chaos.explore.round_state import RoundStage, RoundState
from zephon_chaos.explore.shard import round_seed, tier_order
from zephon_chaos.explore.shrinking import Shrinker
from zephon_chaos.explore.state import ExploreState
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.explore.summary import ExploreResult, TierStats, write_summary
from zephon_chaos.explore.summary_json import write_summary_json
from zephon_chaos.explore.tiers import close_runner, make_runner
from zephon_chaos.extras import missing
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies import scenarios

__all__ = ["ExploreConfig", "Explorer"]


class Explorer:
    """One exploration: its rounds of search (here). It holds a :class:`.judging.Judge`,
    which runs and judges each scenario and confirms the findings, and a
    :class:`.shrinking.Shrinker`, which shrinks them; all three share one
    :class:`.state.ExploreState`."""

    def __init__(self, config: ExploreConfig) -> None:
        result = ExploreResult(
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
        self.state = ExploreState(config, result)
        self.settled: set[str] = set()
        """The signatures a round has shrunk: later rounds pass them, to look for new ones."""
        self.runners: dict[str, ScenarioRunner] = {}
        self._work = Path(tempfile.mkdtemp(prefix="zc-explore-"))
        self._cut = False
        self._confirming = False
        self._run_s: dict[str, float] = {}
        """Per runner tier: a running estimate of one scenario's seconds."""
        self.judge = Judge(self.state, self._runner, self._run)
        self.shrinker = Shrinker(self.state, self.judge, self._runner, self.settled, self._run_s)

    @property
    def config(self) -> ExploreConfig:
        return self.state.config

    @property
    def result(self) -> ExploreResult:
        return self.state.result

    @property
    def findings(self) -> dict[str, Finding]:
        return self.state.findings

    # ---- the whole run -----------------------------------------------------------------
    def run(self) -> ExploreResult:
        cfg, state = self.config, self.state
        state.started = time.monotonic()
        end = state.end = state.started + cfg.budget_s
        search_end = end - reserve_s(cfg.budget_s)
        self._note_missing_extras()
        progress = state.progress = Progress(end, cfg.stream, cfg.progress_interval_s).start()
        try:
            if cfg.left_to is not None:
                self._search(tier_order(cfg.shard)[0], search_end)
            elif cfg.tier == "both":
                first, second = tier_order(cfg.shard)
                share = BOTH_INPROC_SHARE if first == "inproc" else 1 - BOTH_INPROC_SHARE
                split = state.started + share * (search_end - state.started)
                self._search(first, split)
                self._search(second, search_end)
            else:
                self._search(cfg.tier, search_end)
            progress.phase = "confirming"
            self._confirming = True
            try:
                self.judge.confirm(end)
            finally:
                self._confirming = False
                state.clock.stop()
        except KeyboardInterrupt:
            self.result.interrupted = True
        finally:
            progress.phase = "writing the report"
            self._finish()
        return self.result

    def _note_missing_extras(self) -> None:
        """What this run leaves out for want of the ``explore`` extra: said once, on the
        stream and in the summary's notes."""
        for extra in missing():
            self.result.notes.append(extra.left_out())
            if self.config.stream is not None:
                print(f"note: {extra.left_out()}", file=self.config.stream)

    def _finish(self) -> None:
        progress = self.state.progress
        assert progress is not None
        try:
            for runner in self.runners.values():
                with contextlib.suppress(Exception):
                    close_runner(runner)
            self.result.elapsed_s = time.monotonic() - self.state.started
            self.result.findings = sorted(
                self.findings.values(), key=lambda f: (f.known, f.first_seen_s)
            )
            self._write_report()
        finally:
            progress.stop()
            shutil.rmtree(self._work, ignore_errors=True)
            close_database(self._database)

    def _write_report(self) -> None:
        folder = self.config.report_dir / "findings"
        for finding in self.result.findings:
            finding.save(folder, self.config.launch)
        from zephon_chaos.explore.picture import plot_timeline

        shown: tuple[Scenario, ScenarioOutcome | None, str] | None = None
        if self.result.findings:
            first = self.result.findings[0]
            shown = (first.scenario, first.outcome, first.signature)
        elif self.judge.last is not None:
            last = self.judge.last
            shown = (last[0], last[1], "a passing scenario of this exploration")
        if shown is not None:
            self.result.timeline = plot_timeline(
                shown[0], self.config.report_dir / "timeline.png", shown[1], title=shown[2]
            )
        write_summary(self.result)
        write_summary_json(self.result)
        for finding in self.result.findings:
            if finding.outcome is not None:
                discard(finding.outcome)

    # ---- running ---------------------------------------------------------------------------
    def _stats(self, tier: str) -> TierStats:
        return self.result.tiers.setdefault(tier, TierStats(tier))

    def _tier_of(self, runner: ScenarioRunner) -> str:
        return next((t for t, r in self.runners.items() if r is runner), "unknown")

    def _runner(self, tier: str) -> ScenarioRunner:
        if tier not in self.runners:
            runner = make_runner(
                tier, self._work / tier, self.config.deadline_s, self.config.launch
            )
            runner.deadline_cap = self._deadline_cap
            self.runners[tier] = runner
        return self.runners[tier]

    def _deadline_cap(self, wanted_s: float) -> float:
        """What is left of the budget (plus a grace) for the next launch, whose own deadline
        would be ``wanted_s``; noted when it cuts."""
        left = self.state.end + GRACE_S - time.monotonic()
        if left < wanted_s:
            self._cut = True
        return max(left, 1.0)

    def _run(self, runner: ScenarioRunner, scenario: Scenario) -> ScenarioOutcome | None:
        """Run ``scenario``; None if a launch hit the budget's end rather than its deadline."""
        self._cut = False
        runner.deadline_s = flat_deadline_s(self.config.deadline_s, scenario)
        runner.formation_ceiling_s = self.config.deadline_s  # worker processes start after it
        tier = self._tier_of(runner)
        if self._confirming:  # the confirmations after the search: charged to the run's tier
            self.state.clock.switch(self._stats(tier), Activity.CONFIRM)
        began = time.monotonic()
        outcome = runner.run(scenario)
        took = time.monotonic() - began
        last = self._run_s.get(tier)
        self._run_s[tier] = took if last is None else last + RUN_S_WEIGHT * (took - last)
        if self._cut and any(
            r is not None and r.result.timed_out for r in [outcome.reference, *outcome.phases]
        ):
            discard(outcome)
            self._note_once("scenarios cut short by the end of the budget were dropped")
            return None
        return outcome

    # ---- searching -----------------------------------------------------------------------
    def _search(self, tier: str, deadline: float) -> None:
        cfg, state, shrinker = self.config, self.state, self.shrinker
        assert state.progress is not None
        state.progress.tier = tier
        state.progress.phase = "searching"
        stats = self._stats(tier)
        runner = self._runner(tier)
        began = state.clock.switch(stats, Activity.SEARCH)
        round_no = 0
        pending_before = len(shrinker.pending)
        try:
            while time.monotonic() < deadline and not state.goal_met():
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
                state.clock.flush()
                searched = stats.search_s
                self._round(
                    tier, runner, strategy, steering, round_no, deadline, stats, examples, not aims
                )
                if aims:
                    state.clock.flush()
                    stats.aimed_s += stats.search_s - searched
                    stats.aimed_rounds += 1
                shrinker.shrink_pending(deadline, stats)
            shrinker.settle_routes(stats)
            if state.goal_met():
                self.result.notes.append(f"the {tier} search ended early: its goal was met")
            unfinished = len(shrinker.pending) - pending_before
            if unfinished > 0:
                self.result.notes.append(
                    f"{unfinished} {tier} finding(s) left partly shrunk: the shrink allowance "
                    f"(at least {100 * shrinker.share(tier):.0f}% of the search for new "
                    "scenarios) ran out"
                )
        finally:
            stats.seconds += state.clock.stop() - began
            del shrinker.pending[pending_before:]

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
        state = RoundState()
        key = self._database_key(tier)
        # Every round, shard and process saves under one key (not Hypothesis's digest of this
        # nested function): what a round saved, any round anywhere replays. An aimed round
        # neither replays nor saves: its draws mean other scenarios than a plain round's, so
        # a plain round's failure replayed here would pass and be deleted from the shared
        # database, and one saved here would mislead plain rounds.
        database = PinnedKey(self._database, key) if shared and self._database is not None else None

        def keep(flag: bool, save: bool = True) -> None:
            """Whether Hypothesis may delete the call's example (if it replayed one), and save
            it (as it does for any call that raises)."""
            if self._database is not None:
                self._database.keep, self._database.save_ok = flag, save

        @settings(
            max_examples=examples,
            deadline=None,
            database=database,
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
            if state.stage is RoundStage.FAILED:
                assert state.sig is not None
                if scenario != state.failing:
                    return  # the tail of a hill climb, after the round's failure: not run
                state.stage = RoundStage.SHRINKING  # the shrink phase's replay: it just failed
                self.shrinker.begin(state.sig, stats)
                raise violation_type(state.sig)(state.sig)
            if state.stage is RoundStage.SHRINKING:
                assert state.sig is not None
                try:
                    self.shrinker.step(tier, runner, scenario, deadline, stats, state.sig)
                except EndShrinking:
                    keep(True, save=False)  # a candidate never run: no failure to share
                    raise
                return
            # A torchrun round may last many minutes: unfinished shrinking goes on as soon
            # as generating has earned it, not at the round's end only.
            self.shrinker.shrink_pending(deadline, stats)
            judged = self.judge.judge(tier, runner, scenario, deadline, stats)
            sig = judged.sig
            steering.observe(scenario)  # target(): toward cells this exploration reached least
            if sig is None or sig in self.settled:
                keep(not judged.ran or sig is not None)  # a replay not run, or held: not fixed
                return
            state.failed(sig, scenario)
            raise violation_type(sig)(sig)

        keep(False)
        stop: ShrinkStop | None = None
        try:
            with steering:  # declares the tier's cells; measures Zephon's code on some scenarios
                prop()
        except EndShrinking as end:
            stop = end.reason
        except ScenarioViolation:
            pass  # Hypothesis's report of the failure this explorer holds already
        except FlakyFailure:
            pass  # the shrunk failure's last replay passed: the finding keeps what failed
        except Unsatisfiable:
            self._note_once(f"a {tier} round drew no scenario the rules accept")
        if state.sig is None:
            return
        sig = state.sig
        self.settled.add(sig)
        if state.stage is not RoundStage.SHRINKING:  # no shrinking: polishing is all of it
            self.shrinker.begin(sig, stats)
        try:
            if stop is ShrinkStop.ALLOWANCE and self.shrinker.polishable(sig):
                self.shrinker.pending.insert(0, sig)
            else:
                self.shrinker.polish(sig, deadline, stats)
        finally:
            self.state.clock.switch(stats, Activity.SEARCH)
            if self.state.progress is not None:
                self.state.progress.phase = "searching"

    def _note_once(self, note: str) -> None:
        if note not in self.result.notes:
            self.result.notes.append(note)

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
