"""A :class:`ScenarioRunner` whose launches are rank threads: the same runner, the same oracles."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from zephon_chaos.closing import Closing
from zephon_chaos.inproc.launcher import InprocLauncher
from zephon_chaos.inproc.refusal import TierRefusal, inproc_refusal
from zephon_chaos.runner import ScenarioOutcome, ScenarioRunner
from zephon_chaos.scenario import Scenario
from zephon_chaos.workload.records import RankRecord


class InprocScenarioRunner(ScenarioRunner, Closing):
    """Refuses, with the field and the reason, what threads cannot run faithfully."""

    launcher: InprocLauncher

    def open_store(self) -> Any:
        return self.launcher.pool.open()

    def close_store(self, host: Any) -> None:
        self.launcher.pool.retire(host)

    def close(self) -> None:
        """Close the stores the launches hosted (call once, after the last scenario)."""
        self.launcher.close()

    def finish_launch(self) -> None:
        """A rank thread's engines sit in reference cycles: collect them, so that what they
        do at teardown (``RoundCoordinator.cleanup`` deletes the last retained result) is
        done when the launch ends, as a rank process's exit does it, and not in the middle
        of the next launch's view of what this one left (``runner.relaunches``)."""
        gc.collect()

    def run(self, scenario: Scenario) -> ScenarioOutcome:
        reason = inproc_refusal(scenario.validate())
        if reason is not None:
            raise TierRefusal(reason)
        return super().run(scenario)


def inproc_runner(
    root: Path,
    deadline_s: float = 120.0,
    reference_cache: dict[str, list[RankRecord]] | None = None,
) -> InprocScenarioRunner:
    """Scenarios under ``root`` with ranks as threads of this interpreter."""
    return InprocScenarioRunner(
        root,
        launcher=InprocLauncher(tmpdir=Path(root) / "tmp"),
        deadline_s=deadline_s,
        reference_cache=reference_cache,
    )
