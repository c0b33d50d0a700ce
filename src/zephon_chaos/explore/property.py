"""Scenario properties in a test suite: a failure is saved, rerun twice and labeled.

``ScenarioProperty(runner, tier, folder)``: call ``check(scenario)`` from a ``@given``
function and run that function through ``verify``. When Hypothesis reports a failure,
``verify`` reruns the minimal failing scenario twice, labels it reproducible or flaky,
saves its JSON under ``folder/findings/`` and fails with the evidence and the exact replay
command (also printed, so it shows in the test's captured output). Known defects of Zephon
(:mod:`zephon_chaos.explore.known`) do not fail the property; their strict xfails pin them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from zephon_chaos.explore.findings import CONFIRM_RUNS, discard, evidence
from zephon_chaos.explore.known import judged_ok
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.tiers import replay_command
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario


class ScenarioProperty:
    def __init__(self, runner: ScenarioRunner, tier: str, folder: Path | str) -> None:
        self.runner = runner
        self.tier = tier
        self.folder = Path(folder)
        self.runs = 0
        self.failing: tuple[Scenario, ScenarioOutcome] | None = None

    def check(self, scenario: Scenario) -> None:
        """Run ``scenario``; raise AssertionError (with the evidence) if it fails."""
        outcome = self.runner.run(scenario)
        self.runs += 1
        if judged_ok(outcome):
            discard(outcome)
            return
        if self.failing is not None:
            discard(self.failing[1])
        # Hypothesis replays its minimal example last, so the last failure is the minimal one.
        self.failing = (scenario, outcome)
        raise AssertionError(evidence(outcome))

    def verify(self, test: Callable[[], None]) -> None:
        """Run the ``@given`` function ``test``; on failure, settle it and fail with the story."""
        try:
            test()
        except Exception as exc:
            if self.failing is None:
                raise
            raise AssertionError(self.settle()) from exc

    def settle(self) -> str:
        """Rerun the minimal failure twice, save it, and say what it is and how to replay it."""
        assert self.failing is not None
        scenario, outcome = self.failing
        sig = signature(outcome) or "passed"
        reruns = []
        for _ in range(CONFIRM_RUNS):
            again = self.runner.run(scenario)
            reruns.append(signature(again) or "passed")
            discard(again)
        label = "reproducible" if all(r == sig for r in reruns) else "flaky"
        stem = re.sub(r"[^\w.+-]+", "_", sig)[:120]
        path = scenario.with_(name=stem).save(self._target(stem))
        text = "\n".join(
            [
                f"scenario property failed: {sig} ({label}; reruns: {', '.join(reruns)})",
                f"minimal scenario: {scenario.summary()}",
                f"saved: {path}",
                f"replay: {replay_command(path, self.tier)}",
                "",
                evidence(outcome),
                "",
                "scenario JSON:",
                scenario.to_json(),
            ]
        )
        print(text)
        discard(outcome)
        return text

    def _target(self, stem: str) -> Path:
        folder = self.folder / "findings"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{stem}.json"
