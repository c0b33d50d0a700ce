"""Runners for the two tiers, and which tier a scenario needs."""

from __future__ import annotations

from pathlib import Path

from zephon_chaos.explore.known import HANG_SIGNATURES
from zephon_chaos.launch.launch_spec import DEFAULT_LAUNCH_LANE, LAUNCH_LANES
from zephon_chaos.runner import ScenarioRunner
from zephon_chaos.scenario import TIERS, Scenario

TIER_CHOICES: tuple[str, ...] = ("auto", *TIERS)


def tier_for(scenario: Scenario, choice: str = "auto") -> str:
    """``inproc`` when threads can run ``scenario`` faithfully (fast), else ``torchrun``."""
    if choice != "auto":
        return choice
    from zephon_chaos.inproc import inproc_refusal

    return "inproc" if inproc_refusal(scenario) is None else "torchrun"


LAUNCHES: tuple[str, ...] = LAUNCH_LANES


class WarmScenarioRunner(ScenarioRunner):
    """Torchrun groups forked from a pre-warmed server (``zephon_chaos.launch.warm``)."""

    def __init__(self, root: Path, deadline_s: float) -> None:
        from zephon_chaos.diagnostics.stacks import collect_group_stacks
        from zephon_chaos.launch.warm import WarmServerProcess, warm_launcher

        root = Path(root)
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.server = WarmServerProcess(root / "warm-server").start()
        groups = root / "groups"
        groups.mkdir(mode=0o700, exist_ok=True)
        launcher = warm_launcher(self.server, groups, on_deadline=collect_group_stacks)
        super().__init__(root, launcher=launcher, deadline_s=deadline_s)

    def close(self) -> None:
        self.server.close()


def make_runner(
    tier: str, root: Path, deadline_s: float = 120.0, launch: str = DEFAULT_LAUNCH_LANE
) -> ScenarioRunner:
    """A runner for ``tier`` under ``root``; close it with :func:`close_runner`.

    ``launch`` (torchrun tier): ``cli`` runs ``python -m torch.distributed.run`` per launch;
    ``warm`` forks torchrun's agent and workers from a process that imported torch already.
    Every runner knows the known hangs (``explore.known``): one ends when recognised.
    """
    runner = _new_runner(tier, root, deadline_s, launch)
    runner.hang_signatures = HANG_SIGNATURES
    return runner


def _new_runner(tier: str, root: Path, deadline_s: float, launch: str) -> ScenarioRunner:
    if tier == "inproc":
        from zephon_chaos.inproc import inproc_runner

        return inproc_runner(root, deadline_s=deadline_s)
    if tier == "torchrun":
        if launch == "warm":
            return WarmScenarioRunner(root, deadline_s)
        if launch != "cli":
            raise ValueError(f"unknown launch {launch!r}; choose one of {', '.join(LAUNCHES)}")
        return ScenarioRunner(root, deadline_s=deadline_s)
    raise ValueError(f"unknown tier {tier!r}; choose inproc or torchrun")


def close_runner(runner: ScenarioRunner) -> None:
    close = getattr(runner, "close", None)
    if close is not None:
        close()
    runner.reference_cache.clear()


def replay_command(path: Path | str, tier: str) -> str:
    import shlex

    return f"zephon-chaos replay {shlex.quote(str(path))} --tier {tier}"
