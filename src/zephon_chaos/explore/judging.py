"""Running one scenario for the search and judging it; confirming findings at the end.

Every run of the search goes through :meth:`Judge.judge`: it counts the run, adds its cells
to the coverage, and keeps the smallest failing scenario of each signature as a
:class:`~zephon_chaos.explore.findings.Finding`. A scenario the harness could not run is a
harness problem, never a violation. The explorer (:mod:`.search`) holds the judge and hands
it how to run a scenario; the shrinker (:mod:`.shrinking`) runs its candidates through it.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from zephon_chaos.explore.activity import Activity
from zephon_chaos.explore.config import KNOWN_CONFIRM_RUNS
from zephon_chaos.explore.findings import (
    Finding,
    FindingLabel,
    confirmation_order,
    discard,
    evidence,
)
from zephon_chaos.explore.judged import Judged
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.state import ExploreState
from zephon_chaos.explore.summary import TierStats
from zephon_chaos.harness_problem import HARNESS_AREA
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario

RunScenario = Callable[[ScenarioRunner, Scenario], ScenarioOutcome | None]
"""Runs a scenario on a runner: its outcome, None if a launch hit the budget's end."""


class Judge:
    """Runs the scenarios of the search and its shrinking and judges them; keeps the
    findings and confirms them at the end."""

    def __init__(
        self,
        state: ExploreState,
        runner: Callable[[str], ScenarioRunner],
        run: RunScenario,
    ) -> None:
        self._state = state
        self.runner = runner
        """A tier's runner (made on first use)."""
        self.run = run
        """How every scenario judged or confirmed here is run."""
        self.last: tuple[Scenario, ScenarioOutcome] | None = None
        """The last passing scenario and its outcome: the timeline shows it if none failed."""

    def _count(self, tier: str, stats: TierStats) -> None:
        """One more run of ``stats``'s search, on ``tier``'s runner."""
        if tier == stats.tier:
            stats.scenarios += 1
        else:
            stats.in_process_runs += 1
        if self._state.clock.activity is Activity.SEARCH:
            stats.new_scenarios += 1
        assert self._state.progress is not None
        self._state.progress.scenarios += 1

    def judge(
        self,
        tier: str,
        runner: ScenarioRunner,
        scenario: Scenario,
        deadline: float,
        stats: TierStats,
    ) -> Judged:
        """Run one scenario on ``tier``'s ``runner`` for ``stats``'s search, and judge it."""
        state = self._state
        if time.monotonic() >= deadline or state.goal_met():
            return Judged(ran=False)
        assert state.progress is not None
        try:
            judged = self.run(runner, scenario)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            self._count(tier, stats)
            return Judged(ran=True, sig=self._harness_error(tier, scenario, exc))
        if judged is None:
            return Judged(ran=False)
        outcome = judged
        self._count(tier, stats)
        state.result.coverage.add(scenario, outcome, tier)
        state.result.liveness.add(outcome)
        if len(runner.reference_cache) > 256:
            runner.reference_cache.clear()
        sig = signature(outcome)
        if sig is None:
            if self.last is not None:
                discard(self.last[1])
            self.last = (scenario, outcome)
            return Judged(ran=True)
        finding = state.findings.get(sig)
        if finding is None:
            state.findings[sig] = finding = Finding(
                signature=sig,
                tier=stats.tier,
                scenario=scenario,
                report=evidence(outcome),
                first_seen_s=time.monotonic() - state.started,
                outcome=outcome,
            )
            if tier != stats.tier:
                # First seen in process while a finding of this search shrank there: a finding
                # of the search's tier, shrunk in process and then confirmed like the other.
                state.routes[sig] = finding.shrunk_on = tier
            state.progress.findings = len(state.findings)
            state.progress.note(f"finding: {sig} in {scenario.summary()} (shrinking)")
        elif tier != finding.tier and state.routes.get(sig) != tier:
            finding.seen += 1  # seen on another tier: it keeps a scenario its own tier failed
            discard(outcome)
        elif not finding.offer(scenario, outcome):
            discard(outcome)
        elif tier == finding.tier and sig in state.tier_best:
            state.tier_best[sig] = (scenario, finding.report)  # smaller, and failed on its tier
        return Judged(ran=True, sig=sig)

    def _harness_error(self, tier: str, scenario: Scenario, exc: Exception) -> str:
        """A scenario the harness itself could not run: a harness problem, never a violation
        (its finding is labelled so and not rerun)."""
        state = self._state
        sig = f"{HARNESS_AREA}.{type(exc).__name__}.no-resume.no-resume"
        text = f"the harness failed to run the scenario:\n{traceback.format_exc()}"
        finding = state.findings.get(sig)
        if finding is None:
            state.findings[sig] = Finding(
                sig, tier, scenario, text, time.monotonic() - state.started
            )
            assert state.progress is not None
            state.progress.findings = len(state.findings)
            state.progress.note(f"harness problem: {sig}: {exc}")
        else:
            finding.seen += 1
        return sig

    def confirm(self, end: float) -> None:
        """Rerun each finding's minimal scenario to label it (and, with ``--tier both``,
        replay an in-process one on torchrun), while the budget lasts."""
        cfg = self._state.config
        progress = self._state.progress
        for finding in confirmation_order(self._state.findings.values()):
            if finding.harness:
                continue  # our own problem: labelled so, reported apart, not rerun
            if time.monotonic() >= end:
                finding.label = FindingLabel.OUT_OF_TIME
                continue
            assert progress is not None
            progress.tier = finding.tier
            runner = self.runner(finding.tier)
            runs = min(cfg.confirm_runs, KNOWN_CONFIRM_RUNS) if finding.known else cfg.confirm_runs
            finding.confirm(lambda s: self.run(runner, s), runs)  # noqa: B023
            reruns = ", ".join(finding.reruns)
            progress.note(f"{finding.signature}: {finding.label} ({reruns})")
            if cfg.tier == "both" and finding.tier == "inproc":
                if time.monotonic() >= end:
                    finding.confirmed_on["torchrun"] = "not replayed (out of time)"
                    continue
                progress.tier = "torchrun"
                outcome = self.run(self.runner("torchrun"), finding.scenario)
                if outcome is None:
                    finding.confirmed_on["torchrun"] = "not replayed (out of time)"
                    continue
                finding.confirmed_on["torchrun"] = signature(outcome) or "passed"
                discard(outcome)
