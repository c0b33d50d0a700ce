"""Scenario rates of both tiers, and the validation property's examples per second, in one run.

    python benchmarks/explore_rate.py [--inproc 30] [--torchrun 3] [--validation 60]
                                      [--code-coverage 24]

Torchrun is measured twice: CLI launches (``python -m torch.distributed.run``, the default
of ``zephon-chaos``) and warm launches (``--launch warm``: agent and workers forked from a
process that imported torch already).
The scenario is the 2-phase 2 -> 3 resize over C=6 without faults (a checkpoint on a window
boundary at step 2, then two more steps on three ranks). Each run uses another data seed,
so every scenario pays for its own uninterrupted reference run, as in exploration. The first
in-process run (which imports Zephon into the rank threads) is timed apart. Targets: 60
scenarios/min in process, 4/min on torchrun, on 2 cores.

``--code-coverage N``: N more in-process scenarios, alternating pairs without and with the
explorer's measuring of Zephon's code armed (``explore.codecov``: coverage.py on one scenario
in ``MEASURE_EVERY``), so both rates come from the same minutes of a shared machine.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from zephon_chaos.explore.codecov import MEASURE_EVERY
from zephon_chaos.runner import ScenarioRunner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, DataSpec, PipelineSpec

TARGETS = {"inproc": 60.0, "torchrun": 4.0, "torchrun-warm": 4.0}


def resize_2_to_3(seed: int) -> Scenario:
    return Scenario(
        data=DataSpec(seed=seed),
        pipeline=PipelineSpec(canonical_replicas=6),
        launches=(Launch(2, 3, (CheckpointAt(2),)), Launch(3, 2)),
        name=f"bench-2to3-{seed}",
    )


def scenario_rate(runner: ScenarioRunner, runs: int, first_seed: int) -> tuple[float, float]:
    """(seconds, scenarios/min) for ``runs`` scenarios; raises if any fails its oracles."""
    started = time.perf_counter()
    for i in range(runs):
        outcome = runner.run(resize_2_to_3(first_seed + i))
        if not outcome.ok:
            raise SystemExit(f"the benchmark scenario failed:\n{outcome.report()}")
        if outcome.scenario_file is not None:
            shutil.rmtree(outcome.scenario_file.parent, ignore_errors=True)
    seconds = time.perf_counter() - started
    return seconds, 60.0 * runs / seconds


def code_coverage_rates(runner: ScenarioRunner, runs: int, first_seed: int) -> tuple[float, float]:
    """(scenarios/min without, with the explorer's code measuring armed), interleaved."""
    from zephon_chaos.explore.codecov import ZephonCoverage

    code = ZephonCoverage()
    spent = {False: 0.0, True: 0.0}
    done = {False: 0, True: 0}
    for i in range(runs):
        armed = (i // 2) % 2 == 1
        if armed:
            code.arm()
        started = time.perf_counter()
        outcome = runner.run(resize_2_to_3(first_seed + i))
        spent[armed] += time.perf_counter() - started
        done[armed] += 1
        code.saw_scenario()
        code.disarm()
        if not outcome.ok:
            raise SystemExit(f"the benchmark scenario failed:\n{outcome.report()}")
        if outcome.scenario_file is not None:
            shutil.rmtree(outcome.scenario_file.parent, ignore_errors=True)
    if code.reach() is None:
        raise SystemExit(f"Zephon's code was not measured: {code.skipped}")
    off, on = (60.0 * done[k] / spent[k] if spent[k] else 0.0 for k in (False, True))
    return off, on


def validation_examples_per_s(examples: int) -> tuple[int, float] | None:
    """The configuration-validation property (predict vs probe on generated configurations).

    None when ``zephon_chaos.validation`` is not in this build. The hook for that property's
    owner: this runs the same check as ``tests/zephon/test_validation.py``.
    """
    try:
        from hypothesis import HealthCheck, given, settings

        from zephon_chaos.validation.configs import zephon_configs
        from zephon_chaos.validation.judge import compare, predict
        from zephon_chaos.validation.probe import Endpoints, probe
    except ImportError:
        return None
    count = 0
    with Endpoints() as endpoints:

        @settings(
            max_examples=examples,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(cfg=zephon_configs())
        def holds(cfg) -> None:  # type: ignore[no-untyped-def]
            nonlocal count
            count += 1
            problems = compare(predict(cfg), probe(cfg, endpoints))
            if problems:
                raise AssertionError(f"{cfg.replay()}: {problems}")

        started = time.perf_counter()
        holds()
        seconds = time.perf_counter() - started
    return count, count / seconds


def _timed(what: str, fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    print(f"measuring {what} ...", flush=True)
    return fn()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inproc", type=int, default=30, metavar="N")
    parser.add_argument("--torchrun", type=int, default=3, metavar="N")
    parser.add_argument("--validation", type=int, default=60, metavar="N")
    parser.add_argument("--code-coverage", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="zc-bench-explore-"))
    rows: list[tuple[str, int, float, float]] = []
    coverage_rates: tuple[float, float] | None = None
    try:
        from zephon_chaos.inproc import inproc_runner

        with inproc_runner(root / "inproc") as runner:
            warm_s, _ = _timed("the first in-process scenario", lambda: scenario_rate(runner, 1, 0))
            if args.inproc > 0:
                seconds, rate = _timed(
                    f"{args.inproc} in-process scenarios",
                    lambda: scenario_rate(runner, args.inproc, 1),
                )
                rows.append(("inproc", args.inproc, seconds, rate))
            if args.code_coverage > 0:
                print(f"measuring {args.code_coverage} in-process scenarios, code coverage "
                      "armed on every other pair ...", flush=True)
                coverage_rates = code_coverage_rates(runner, args.code_coverage, 500)
        if args.torchrun > 0:
            from zephon_chaos.explore.tiers import close_runner, make_runner

            for launch, tier in (("cli", "torchrun"), ("warm", "torchrun-warm")):
                runner = make_runner("torchrun", root / tier, launch=launch)
                try:
                    seconds, rate = _timed(
                        f"{args.torchrun} torchrun scenarios ({launch} launches)",
                        lambda: scenario_rate(runner, args.torchrun, 1000),  # noqa: B023
                    )
                finally:
                    close_runner(runner)
                rows.append((tier, args.torchrun, seconds, rate))
        validation = validation_examples_per_s(args.validation) if args.validation > 0 else None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print("2-phase 2 -> 3 resize, C=6, no faults (reference run included)")
    print(f"{'tier':<15}{'scenarios':>10}{'seconds':>10}{'per min':>10}{'target':>8}{'ratio':>8}")
    for tier, runs, seconds, rate in rows:
        target = TARGETS[tier]
        print(
            f"{tier:<15}{runs:>10}{seconds:>10.1f}{rate:>10.1f}{target:>8.0f}{rate / target:>8.2f}"
        )
    print(f"first in-process scenario (imports Zephon): {warm_s:.1f} s")
    if coverage_rates is not None:
        off, on = coverage_rates
        print(
            f"in process, interleaved: {off:.1f}/min without, {on:.1f}/min with Zephon's code "
            f"measured on one scenario in {MEASURE_EVERY} (ratio {on / off:.2f})"
        )
    rates = {tier: rate for tier, _, _, rate in rows}
    for other in ("torchrun", "torchrun-warm"):
        if "inproc" in rates and other in rates:
            print(f"inproc / {other}: {rates['inproc'] / rates[other]:.1f}x")
    if validation is None:
        print("validation property: not measured (zephon_chaos.validation absent or skipped)")
    else:
        count, per_s = validation
        print(f"validation property: {count} examples, {per_s:.1f} examples/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
