"""Running one scenario for the search and judging it; confirming findings at the end.

Every run of the search goes through :meth:`JudgingMixin._judge`: it counts the run, adds its
cells to the coverage, and keeps the smallest failing scenario of each signature as a
:class:`~zephon_chaos.explore.findings.Finding`. A scenario the harness could not run is a
harness problem, never a violation. A mixin of :class:`.search.Explorer`.
"""

from __future__ import annotations

import time
import traceback
from typing import TYPE_CHECKING

from zephon_chaos.explore.activity import Activity, ActivityClock
from zephon_chaos.explore.config import KNOWN_CONFIRM_RUNS, ExploreConfig
from zephon_chaos.explore.findings import (
    Finding,
    FindingLabel,
    confirmation_order,
    discard,
    evidence,
)
from zephon_chaos.explore.judged import Judged
from zephon_chaos.explore.progress import Progress
from zephon_chaos.explore.report import ExploreResult, TierStats
from zephon_chaos.explore.signature import signature
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario


class JudgingMixin:
    config: ExploreConfig
    result: ExploreResult
    findings: dict[str, Finding]
    runners: dict[str, ScenarioRunner]
    progress: Progress | None
    _clock: ActivityClock
    _started: float
    _last: tuple[Scenario, ScenarioOutcome] | None
    _routes: dict[str, str]
    _tier_best: dict[str, tuple[Scenario, str]]

    if TYPE_CHECKING:  # the explorer's own methods, for the checker (not at run time)
        def _runner(self, tier: str) -> ScenarioRunner:
            raise NotImplementedError

        def _run(self, runner: ScenarioRunner, scenario: Scenario) -> ScenarioOutcome | None:
            raise NotImplementedError

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
            runs = min(cfg.confirm_runs, KNOWN_CONFIRM_RUNS) if finding.known else cfg.confirm_runs
            finding.confirm(lambda s: self._run(runner, s), runs)  # noqa: B023
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
