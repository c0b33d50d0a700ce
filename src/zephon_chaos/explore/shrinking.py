"""The explorer's shrinking: what it may spend, where a finding shrinks, and polishing.

Shrinking is paid for by searching (``SEARCH_SHARE``): a finding's candidates run while the
tier's allowance lasts, and what is left waits for the allowance to grow. A torchrun finding
that replays in process with the same signature is shrunk in process and its minimal
scenario confirmed on torchrun (its *route*). The explorer (:mod:`.search`) holds a
:class:`Shrinker`, which runs every candidate through the judge (:mod:`.judging`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from zephon_chaos.explore.activity import Activity, shrink_allowance_s
from zephon_chaos.explore.config import KNOWN_SHRINK_SHARE, POLISH_S, SEARCH_SHARE
from zephon_chaos.explore.findings import discard
from zephon_chaos.explore.judged import (
    EndShrinking,
    RouteCheck,
    ShrinkStop,
    expressible_in_process,
    violation_type,
)
from zephon_chaos.explore.judging import Judge
from zephon_chaos.explore.polish import polish
from zephon_chaos.explore.state import ExploreState
from zephon_chaos.explore.summary import TierStats
from zephon_chaos.runner import ScenarioRunner
from zephon_chaos.scenario import Scenario


class Shrinker:
    """Shrinks the findings of the search within its allowance: Hypothesis's candidates one
    at a time (:meth:`step`), then the polishing pass (:meth:`polish`); what the allowance
    cut short waits in :attr:`pending`."""

    def __init__(
        self,
        state: ExploreState,
        judge: Judge,
        runner: Callable[[str], ScenarioRunner],
        settled: AbstractSet[str],
        run_s: Mapping[str, float],
    ) -> None:
        self._state = state
        self._judge = judge
        self._runner = runner
        """A tier's runner (made on first use)."""
        self._settled = settled
        """The signatures a round of the search has shrunk (the explorer's)."""
        self._run_s = run_s
        """Per runner tier: a running estimate of one scenario's seconds (the explorer's)."""
        self._began: dict[str, float] = {}
        """Per signature: when Hypothesis's shrinking of it began."""
        self._polished_s: dict[str, float] = {}
        self.pending: list[str] = []
        """Findings whose shrinking is unfinished: the allowance ran out, or they were first
        seen while another was shrinking. Polished as the allowance grows."""

    def begin(self, sig: str, stats: TierStats) -> None:
        """The shrinking of ``sig`` begins now: the clock charges ``stats``'s shrinking, and
        ``sig``'s own shrinking time counts from here."""
        self._began[sig] = self._state.clock.switch(stats, Activity.SHRINK)

    def step(
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
            raise EndShrinking(stop)
        route = self._route(target, deadline, stats)
        if route is None:
            raise EndShrinking(ShrinkStop.ALLOWANCE)
        if route != tier:
            if not expressible_in_process(scenario):
                return  # a candidate threads cannot run: not a smaller failure here
            runner = self._runner(route)
        judged = self._judge.judge(route, runner, scenario, deadline, stats)
        if not judged.ran:
            raise EndShrinking(ShrinkStop.DEADLINE)
        if judged.sig == target:
            raise violation_type(target)(target)
        self._note_unshrunk(judged.sig)

    def _shrunk_enough(
        self, sig: str, deadline: float, stats: TierStats | None = None
    ) -> ShrinkStop | None:
        """Why Hypothesis's shrinking of ``sig`` ends now, or None to go on: past its own
        time (``shrink_s``, less for a known defect, none for a known hang), the search's
        deadline, or the tier's shrink allowance (not enough left for one more run on its
        route)."""
        state = self._state
        finding = state.findings[sig]
        if finding.known and finding.hung:
            return ShrinkStop.BOUND  # each candidate a hang; its standalone repro is minimal
        bound = state.config.shrink_s * (KNOWN_SHRINK_SHARE if finding.known else 1.0)
        began = self._began.get(sig, state.started + finding.first_seen_s)
        now = time.monotonic()
        if now - began > bound:
            return ShrinkStop.BOUND
        if now >= deadline or state.goal_met():
            return ShrinkStop.DEADLINE
        if stats is not None and not self._affordable(stats, state.routes.get(sig, finding.tier)):
            return ShrinkStop.ALLOWANCE
        return None

    # ---- the shrink allowance, routes and polishing --------------------------------------
    def share(self, tier: str) -> float:
        """The least share of ``tier``'s search that goes to new scenarios."""
        share = self._state.config.search_share
        return share if share is not None else SEARCH_SHARE.get(tier, SEARCH_SHARE["torchrun"])

    def _allowance_s(self, stats: TierStats) -> float:
        """Seconds of shrinking ``stats``'s search has earned and not spent."""
        self._state.clock.flush()
        spent = stats.shrink_s + stats.confirm_s  # the search's confirmations serve shrinking
        return shrink_allowance_s(stats.search_s, spent, self.share(stats.tier))

    def _affordable(self, stats: TierStats, run_tier: str) -> bool:
        """Whether one more run on ``run_tier`` fits the allowance (by its running estimate)."""
        left = self._allowance_s(stats)
        return left > 0 and left >= self._run_s.get(run_tier, 0.0)

    def polishable(self, sig: str) -> bool:
        """Harness errors and known defects (whose minimal scenarios are pinned by strict
        xfails) are not worth the polishing time of a budget."""
        finding = self._state.findings[sig]
        return not finding.harness and not finding.known

    def _note_unshrunk(self, sig: str | None) -> None:
        """A new failure seen while another shrinks: polished later, as the allowance allows."""
        if (
            sig is not None
            and sig not in self._settled
            and sig not in self.pending
            and self.polishable(sig)
        ):
            self.pending.append(sig)

    def _route(self, sig: str, deadline: float, stats: TierStats) -> str | None:
        """The tier ``sig`` shrinks on: in process for a torchrun finding that replays there
        with the same signature, else its own. None: not decided (no allowance or time).

        Decided once its smallest scenario is expressible in process (threads refuse what
        only processes do): from then on, candidates threads cannot run are passed over."""
        routes = self._state.routes
        route = routes.get(sig)
        if route is not None:
            return route
        finding = self._state.findings[sig]
        route = finding.tier
        if finding.tier == "torchrun" and not finding.harness:
            if not expressible_in_process(finding.scenario):
                finding.shrunk_on = route
                return route  # undecided: a smaller failing scenario may be expressible
            if not self._affordable(stats, "inproc"):
                return None
            best = (finding.scenario, finding.report)
            inproc = self._runner("inproc")
            judged = self._judge.judge("inproc", inproc, finding.scenario, deadline, stats)
            if not judged.ran:
                return None
            if judged.sig == sig:
                route = "inproc"
                self._state.tier_best[sig] = best
        routes[sig] = route
        finding.shrunk_on = route
        return route

    def polish(self, sig: str, deadline: float, stats: TierStats) -> None:
        """The domain-aware pass after Hypothesis's shrinking, within the finding's own time
        (``POLISH_S``) and the tier's allowance; cut short by the allowance, it waits.
        Call it while the clock charges shrinking."""
        findings = self._state.findings
        if sig in self.pending:
            self.pending.remove(sig)
        if not self.polishable(sig):
            self._shrunk(sig, deadline, stats)
            return
        route = self._route(sig, deadline, stats)
        if route is None:
            self.pending.append(sig)
            return
        own_left = POLISH_S - self._polished_s.get(sig, 0.0)
        allowed = self._allowance_s(stats) - self._run_s.get(route, 0.0)
        if own_left <= 0:
            self._shrunk(sig, deadline, stats)
            return
        if allowed <= 0:
            self.pending.append(sig)
            return
        assert self._state.progress is not None
        self._state.progress.phase = f"polishing {sig}"
        began = time.monotonic()
        until = min(deadline, began + min(own_left, allowed))

        def judge(s: Scenario) -> str | None:
            # Polishing may make a torchrun finding expressible in process: it goes on there.
            on = self._route(sig, deadline, stats) or findings[sig].tier
            if on != findings[sig].tier and not expressible_in_process(s):
                return None
            return self._judge.judge(on, self._runner(on), s, deadline, stats).sig

        polish(findings[sig].scenario, sig, judge, until)
        now = time.monotonic()
        self._polished_s[sig] = self._polished_s.get(sig, 0.0) + now - began
        if now < until or self._polished_s[sig] >= POLISH_S:
            self._shrunk(sig, deadline, stats)  # no simpler candidate fails, or its time is up
        elif now < deadline:
            self.pending.append(sig)

    def shrink_pending(self, deadline: float, stats: TierStats) -> None:
        """Go on polishing unfinished findings with what searching has earned since."""
        state = self._state
        for sig in list(self.pending):
            if time.monotonic() >= deadline or not self._affordable(
                stats, state.routes.get(sig, state.findings[sig].tier)
            ):
                return
            with state.clock.during(stats, Activity.SHRINK):
                self.polish(sig, deadline, stats)
            assert state.progress is not None
            state.progress.phase = "searching"
            if sig in self.pending:
                return  # the allowance ran out again

    def _shrunk(self, sig: str, deadline: float, stats: TierStats) -> None:
        """Shrinking of ``sig`` is over: a minimum found in process is confirmed on its tier."""
        finding = self._state.findings[sig]
        route = self._state.routes.get(sig, finding.tier)
        if route != finding.tier and self._confirm_route(sig, stats) is RouteCheck.REFUTED:
            self.polish(sig, deadline, stats)  # on its own tier now, within the allowance
            return
        finding.shrunk_s = self._state.elapsed()

    def _confirm_route(self, sig: str, stats: TierStats) -> RouteCheck:
        """Rerun a finding shrunk in process on its own tier; if it does not fail alike there,
        go back to its smallest scenario that did, and shrink on that tier from then on. One
        first seen in process (while another shrank there) has none: it is an in-process
        finding then."""
        state = self._state
        finding = state.findings[sig]
        route = state.routes[sig]
        assert state.progress is not None
        state.progress.phase = f"confirming {sig} on {finding.tier}"
        with state.clock.during(stats, Activity.CONFIRM):
            judged = self._judge.judge(
                finding.tier, self._runner(finding.tier), finding.scenario, state.end, stats
            )
        if not judged.ran:
            return RouteCheck.NOT_RUN
        state.routes[sig] = finding.tier  # its shrinking in process is over
        best = state.tier_best.pop(sig, None)
        if judged.sig == sig:
            stats.shrunk_in_process += 1
            return RouteCheck.CONFIRMED
        if best is None:
            state.result.notes.append(
                f"{sig}: first seen in process while another finding shrank there; its "
                f"minimal scenario on {finding.tier}: {judged.sig or 'passed'}, so it is "
                "reported as an in-process finding"
            )
            state.routes[sig] = finding.tier = route
            return RouteCheck.IN_PROCESS_ONLY
        scenario, report = best
        if finding.outcome is not None:
            discard(finding.outcome)
            finding.outcome = None
        finding.scenario, finding.report = scenario, report
        state.routes[sig] = finding.shrunk_on = finding.tier
        state.result.notes.append(
            f"{sig}: its minimal scenario shrunk in process did not fail alike on "
            f"{finding.tier} ({judged.sig or 'passed'}); shrunk on {finding.tier} instead"
        )
        return RouteCheck.REFUTED

    def settle_routes(self, stats: TierStats) -> None:
        """At the end of a search: findings shrunk in process but unfinished are confirmed on
        their own tier too, so the scenario reported is one that fails there."""
        routes, findings = self._state.routes, self._state.findings
        for sig in [s for s, route in routes.items() if route != findings[s].tier]:
            self._confirm_route(sig, stats)
