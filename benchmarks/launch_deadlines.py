"""Each launch's deadline (``runner.deadlines``) against how long it actually took.

Runs K generated torchrun scenarios (the explorer's strategies, seeded) through the explorer's
runner and prints, per launch, the actual duration, the deadline it ran under, their ratio,
and the deadline's terms; then the largest ratio among launches that ended by themselves
under a derived deadline. It must stay well under 1 (docs/explore.md, "Launch deadlines"):
a ratio near 1 is a launch a loaded machine could push past its deadline, a false hang.
Reference runs get the flat deadline (nothing measured yet) and are shown, not counted.
Bounded: no scenario starts after --max-seconds (default 110).

    python benchmarks/launch_deadlines.py [--scenarios K] [--seed N] [--launch warm|cli]
                                          [--store-faults] [--profile downstream]
"""

from __future__ import annotations

import argparse
import sys
import time

from hypothesis import HealthCheck, Phase, given, seed, settings

from zephon_chaos.bench.launch_timing import private_root
from zephon_chaos.bench.machine import load_note
from zephon_chaos.explore.config import flat_deadline_s
from zephon_chaos.explore.tiers import close_runner, make_runner
from zephon_chaos.runner.outcome import PhaseRun
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies import scenarios

DEADLINE_S = 120.0
"""The explorer's default ``--deadline``: the ceiling of every derived deadline."""


def drawn(count: int, draw_seed: int, store_faults: bool, profile: str) -> list[Scenario]:
    """``count`` torchrun scenarios as the explorer draws them, the same for the same seed."""
    out: list[Scenario] = []

    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @seed(draw_seed)
    @given(
        scenarios(
            tier="torchrun",
            max_world=4,
            max_phases=3,
            store_faults=store_faults,
            profile=profile,  # type: ignore[arg-type]
        )
    )
    def collect(scenario: Scenario) -> None:
        out.append(scenario)

    collect()
    return out[:count]


def row(scenario_no: int, name: str, run: PhaseRun) -> tuple[str, float | None]:
    """The launch's line, and its ratio where it counts (a derived deadline, no timeout)."""
    took = run.result.duration_s
    deadline = run.deadline
    assert deadline is not None, "the runner records every launch's deadline"
    ratio = took / deadline.seconds
    end = "TIMED OUT" if run.result.timed_out else ("ok" if run.result.ok else "failed")
    line = (
        f"{scenario_no:>3} {name:<10} W={run.phase.world_size} steps={run.phase.steps:<2} "
        f"actual {took:6.1f}s  deadline {deadline.seconds:6.1f}s  ratio {ratio:.2f}  {end}\n"
        f"      {deadline.describe()}"
    )
    counted = deadline.formula_s is not None and not run.result.timed_out
    return line, ratio if counted else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenarios", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--launch", choices=("warm", "cli"), default="warm")
    parser.add_argument("--store-faults", action="store_true")
    parser.add_argument("--profile", choices=("default", "downstream"), default="default")
    parser.add_argument("--max-seconds", type=float, default=110.0)
    args = parser.parse_args(argv)
    began = time.monotonic()
    chosen = drawn(args.scenarios, args.seed, args.store_faults, args.profile)
    ratios: list[float] = []
    print(f"launch deadlines, {args.launch} lane, seed {args.seed} ({load_note()})")
    with private_root("zc-deadlines-") as root:
        runner = make_runner("torchrun", root, DEADLINE_S, args.launch)
        try:
            for n, scenario in enumerate(chosen, 1):
                if time.monotonic() - began > args.max_seconds:
                    print(f"stopped before scenario {n}: --max-seconds {args.max_seconds:g}")
                    break
                runner.deadline_s = flat_deadline_s(DEADLINE_S, scenario)
                outcome = runner.run(scenario)
                print(f"--- scenario {n}: {scenario.summary().splitlines()[0]}")
                runs = [("reference", outcome.reference)] if outcome.reference else []
                runs += [(f"phase {r.index}", r) for r in outcome.phases]
                for name, run in runs:
                    line, ratio = row(n, name, run)
                    print(line, flush=True)
                    if ratio is not None:
                        ratios.append(ratio)
        finally:
            close_runner(runner)
    if not ratios:
        print("no launch ran under a derived deadline")
        return 1
    print(f"max ratio actual/deadline: {max(ratios):.2f} over {len(ratios)} launch(es)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
