"""Run a scenario: reference and phases as real groups, then the oracles, then a verdict.

``scenario_runner`` holds the loop over a scenario's launches; ``outcome`` what it gives;
``checks`` the runner's own checks of a launch; ``resume`` what one launch hands the next.
"""

from __future__ import annotations

from zephon_chaos.runner.checks import crash_problems, expected_failure_problems, failed_launch
from zephon_chaos.runner.outcome import PhaseRun, ResumeFact, ScenarioOutcome, surviving_checkpoint
from zephon_chaos.runner.resume import _Resume, restarted_attempt
from zephon_chaos.runner.scenario_runner import (
    Launcher,
    ScenarioRunner,
    cli_launcher,
    round_fault_launch,
    stall_deadline_s,
    workload_spec,
)

__all__ = [
    "Launcher",
    "PhaseRun",
    "ResumeFact",
    "ScenarioOutcome",
    "ScenarioRunner",
    "_Resume",
    "cli_launcher",
    "crash_problems",
    "expected_failure_problems",
    "failed_launch",
    "restarted_attempt",
    "round_fault_launch",
    "stall_deadline_s",
    "surviving_checkpoint",
    "workload_spec",
]
