"""What one sighting of a known hang costs: the same scenario with the hang watch off (the
launch waits out its deadline) and on (cut short once quiet and recognised).

The scenario is the child-fault one that meets ``killed-worker-orphans-task-queue-lock``
(``tests/zephon/test_faults_children.py``: G 2 -> 1, C = 4, ``runner: process``, rank 1
kills its workers mid-launch), with the explorer's deadline for worker processes
(``explore.config``: 120 s x ``WORKER_PROCESS_FACTOR``) and the default quiet period
(``runner.hangs.quiet_period_s``). The defect is met by timing (a killed worker idle in
``task_queue.get()``), so each run prints whether its launch hung; a ratio is printed only
where both hung. CLI lane, one run each, off first.

    python benchmarks/known_hang_cost.py [--at-step K] [--quiet-s S]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from zephon_chaos.bench.launch_timing import private_root
from zephon_chaos.bench.machine import load_note
from zephon_chaos.explore.config import WORKER_PROCESS_FACTOR
from zephon_chaos.explore.known import HANG_SIGNATURES, explaining
from zephon_chaos.runner import ScenarioRunner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import normalised
from zephon_chaos.workload.spec import CheckpointAt, ChildFault, DataSpec, PipelineSpec, SourceSpec

DEADLINE_S = 120.0 * WORKER_PROCESS_FACTOR


def killed_workers(at_step: int) -> Scenario:
    """G 2 -> 1 over C = 4 lanes of endless data; rank 1 kills its workers before
    ``at_step`` (the scenario of ``tests/zephon/test_faults_children.py``)."""
    scenario = Scenario(
        data=DataSpec(sources=(SourceSpec("a", shards=(40, 40, 40, 40), exhausted="repeat"),)),
        pipeline=PipelineSpec(canonical_replicas=4, runner="process"),
        launches=(
            Launch(2, 5, (CheckpointAt(5),), child_faults=(ChildFault(1, at_step),)),
            Launch(1, 3),
        ),
        name=f"workers-killed-at-{at_step}",
    )
    return normalised(scenario).validate()


def run_once(
    root: Path, scenario: Scenario, watch: bool, quiet_s: float | None
) -> tuple[float, bool, str]:
    """One run: its seconds, whether a launch hung, and a line on how it ended."""
    runner = ScenarioRunner(root, deadline_s=DEADLINE_S)
    if watch:
        runner.hang_signatures = HANG_SIGNATURES
        runner.hang_quiet_s = quiet_s
    began = time.monotonic()
    outcome = runner.run(scenario)
    took = time.monotonic() - began
    hung = [r.result for r in outcome.phases if r.result.timed_out]
    known = ", ".join(d.id for d in explaining(outcome)) or "none"
    if not hung:
        return took, False, f"{took:.1f} s, no launch hung (known: {known})"
    result = hung[0]
    how = result.cut_short.describe() if result.cut_short else "ended at its deadline"
    return took, True, f"{took:.1f} s, launch {result.duration_s:.1f} s, {how} (known: {known})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--at-step", type=int, default=2)
    parser.add_argument("--quiet-s", type=float, default=None, help="default: quiet_period_s")
    args = parser.parse_args(argv)
    scenario = killed_workers(args.at_step)
    print(f"scenario: {scenario.summary()}; deadline {DEADLINE_S:.0f} s; {load_note()}")
    seconds: dict[str, float] = {}
    with private_root() as root:
        for watch in (False, True):
            name = "watch on " if watch else "watch off"
            folder = root / ("on" if watch else "off")
            took, hung, line = run_once(folder, scenario, watch, args.quiet_s)
            print(f"{name}: {line}", flush=True)
            if hung:
                seconds[name] = took
    if len(seconds) == 2:
        off, on = seconds["watch off"], seconds["watch on "]
        print(f"ratio off/on: {off / on:.2f} ({off - on:.0f} s saved a sighting)")
    else:
        print("ratio: not measured (the defect was not met by both runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
