"""Run a scenario: reference and phases as real groups, then the oracles, then a verdict.

``scenario_runner`` holds the loop over a scenario's launches; ``fate`` how each launch
ended (one :class:`Fate`); ``checks`` the runner's own checks of a launch; ``resume`` what
one launch hands the next; ``outcome`` what a scenario gives.
"""

from __future__ import annotations

from zephon_chaos.runner.checks import crash_problems, expected_failure_problems, failed_launch
from zephon_chaos.runner.fate import Fate, PhaseFate, phase_fate
from zephon_chaos.runner.outcome import PhaseRun, ResumeFact, ScenarioOutcome, surviving_checkpoint
from zephon_chaos.runner.resume import Resume, restarted_attempt
from zephon_chaos.runner.scenario_runner import (
    Launcher,
    ScenarioRunner,
    cli_launcher,
    workload_spec,
)

__all__ = [
    "Fate",
    "Launcher",
    "PhaseFate",
    "PhaseRun",
    "Resume",
    "ResumeFact",
    "ScenarioOutcome",
    "ScenarioRunner",
    "cli_launcher",
    "crash_problems",
    "expected_failure_problems",
    "failed_launch",
    "phase_fate",
    "restarted_attempt",
    "surviving_checkpoint",
    "workload_spec",
]
