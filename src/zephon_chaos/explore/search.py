"""The search: rounds of a Hypothesis property over generated scenarios, under a time budget.

Each round is a ``@given`` test (phases generate + shrink, no database, every distinct
failure reported), so Hypothesis's own shrinker minimizes what it finds. A failure raises an
exception type made for its signature, which Hypothesis takes for a distinct bug and
shrinks on its own; a signature shrunk in an earlier round passes from then on, so rounds
look for new kinds of failure. The smallest failing scenario per signature is kept as it
goes, so an interrupted or out-of-time search still reports what it found.

After the search, each finding is rerun (twice by default) and labeled reproducible or
flaky; with ``--tier both``, findings of the in-process tier are replayed on torchrun too.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hypothesis import HealthCheck, Verbosity, given, seed, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis.strategies import SearchStrategy

from zephon_chaos.explore.findings import CONFIRM_RUNS, Finding, FindingLabel, discard, evidence
from zephon_chaos.explore.polish import polish
from zephon_chaos.explore.progress import Progress
from zephon_chaos.explore.report import ExploreResult, TierStats, write_summary
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.steer import RoundSteering
from zephon_chaos.explore.tiers import close_runner, make_runner
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies import scenarios

ROUND_EXAMPLES = 40
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


class ScenarioViolation(AssertionError):
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
    """Torchrun tier: faults on the ranks' links to the store, with retry policies."""
    profile: str = "default"
    """Odds of the generated pipelines (``strategies.PROFILES``): ``downstream`` makes what
    torchtitan-zephon runs the common case on torchrun."""
    confirm_runs: int = CONFIRM_RUNS
    stream: TextIO | None = None
    progress_interval_s: float = 15.0
    shrink_s: float = SHRINK_S
    stop_when: Callable[[dict[str, Finding]], bool] | None = None
    """Checked after each round: True ends the search early (tests stop once they have theirs)."""


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
        )
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
            self._confirm(end)
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
        outcome = runner.run(scenario)
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
        stats = self.result.tiers.setdefault(tier, TierStats(tier))
        runner = self._runner(tier)
        strategy = scenarios(
            tier=tier,  # type: ignore[arg-type]
            max_world=cfg.max_world,
            max_phases=cfg.max_phases,
            plant=cfg.plant,
            store_faults=cfg.store_faults and tier == "torchrun",
            profile=cfg.profile,  # type: ignore[arg-type]
        )
        began = time.monotonic()
        round_no = 0
        try:
            while time.monotonic() < deadline and not self._goal_met():
                round_no += 1
                self._round(tier, runner, strategy, round_no, deadline, stats)
            if self._goal_met():
                self.result.notes.append(f"the {tier} search ended early: its goal was met")
        finally:
            stats.seconds += time.monotonic() - began

    def _round(
        self,
        tier: str,
        runner: ScenarioRunner,
        strategy: SearchStrategy[Scenario],
        round_no: int,
        deadline: float,
        stats: TierStats,
    ) -> None:
        """One Hypothesis run: up to ROUND_EXAMPLES scenarios, then shrinking what failed."""
        raised: set[str] = set()
        steering = RoundSteering(self.result.coverage, tier, self.config, round_no)

        @settings(
            max_examples=ROUND_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=False,
            phases=[HypothesisPhase.generate, HypothesisPhase.target, HypothesisPhase.shrink],
            report_multiple_bugs=True,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
        )
        @seed(self.config.seed * 1_000_003 + round_no * 7 + (0 if tier == "inproc" else 1))
        @given(strategy)
        def prop(scenario: Scenario) -> None:
            if raised and all(self._shrunk_enough(s) for s in raised):
                return  # every failure shrunk long enough: end the shrinking without a run
            sig = self._check(tier, runner, scenario, deadline, stats)
            steering.observe(scenario)  # target(): toward cells this exploration reached least
            if sig is None or sig in self.settled:
                return
            if sig in raised and self._shrunk_enough(sig):
                return  # shrunk long enough: a pass ends Hypothesis's shrinking of it
            raised.add(sig)
            raise violation_type(sig)(sig)

        # steering declares the tier's cells and measures Zephon's code on some scenarios
        with steering, contextlib.suppress(Exception):
            prop()
        self.settled |= raised
        for sig in sorted(raised):
            finding = self.findings[sig]
            # Harness errors and known defects (whose minimal scenarios are pinned by strict
            # xfails) are not worth the polishing time of a budget.
            if not finding.signature.startswith("harness.") and not finding.known:
                assert self.progress is not None
                self.progress.phase = f"polishing {sig}"
                polish(
                    finding.scenario,
                    sig,
                    lambda s: self._check(tier, runner, s, deadline, stats),
                    min(deadline, time.monotonic() + POLISH_S),
                )
                self.progress.phase = "searching"
            finding.shrunk_s = time.monotonic() - self._started

    def _shrunk_enough(self, sig: str) -> bool:
        """Past its shrinking time: ``shrink_s``, less for a known defect."""
        finding = self.findings[sig]
        budget = self.config.shrink_s * (KNOWN_SHRINK_SHARE if finding.known else 1.0)
        return self._elapsed() - finding.first_seen_s > budget

    def _check(
        self,
        tier: str,
        runner: ScenarioRunner,
        scenario: Scenario,
        deadline: float,
        stats: TierStats,
    ) -> str | None:
        """Run one scenario; its signature if it fails (None past the deadline or if ok)."""
        if time.monotonic() >= deadline or self._goal_met():
            return None
        assert self.progress is not None
        try:
            judged = self._run(runner, scenario)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            stats.scenarios += 1
            self.progress.scenarios += 1
            return self._harness_error(tier, scenario, exc)
        if judged is None:
            return None
        outcome = judged
        stats.scenarios += 1
        self.progress.scenarios += 1
        self.result.coverage.add(scenario, outcome, tier)
        self.result.liveness.add(outcome)
        if len(runner.reference_cache) > 256:
            runner.reference_cache.clear()
        sig = signature(outcome)
        if sig is None:
            if self._last is not None:
                discard(self._last[1])
            self._last = (scenario, outcome)
            return None
        finding = self.findings.get(sig)
        if finding is None:
            self.findings[sig] = Finding(
                signature=sig,
                tier=tier,
                scenario=scenario,
                report=evidence(outcome),
                first_seen_s=time.monotonic() - self._started,
                outcome=outcome,
            )
            self.progress.findings = len(self.findings)
            self.progress.note(f"finding: {sig} in {scenario.summary()} (shrinking)")
        elif not finding.offer(scenario, outcome):
            discard(outcome)
        return sig

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
        for finding in sorted(self.findings.values(), key=lambda f: f.first_seen_s):
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
