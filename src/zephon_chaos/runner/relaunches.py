"""What each launch of a scenario meets of the ones before, and proof the harness changed none.

The deployment (``deployment.Deployment``) says what outlives a launch: the aggregation
directory and the hosted store, for the job or per launch. Before each launch this reads what
that launch will meet (a round a dead launch left open in its namespace), runs the operator
step the deployment names, if any, and checks that Zephon's state there is what the last
launch left: a change with no step of the deployment to make it is the harness's own
problem (``HarnessGap.CHANGED_BETWEEN_LAUNCHES``), never a repair it may make.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zephon_chaos.deployment import Deployment
from zephon_chaos.faults.leftover_round import (
    DirRounds,
    LeftoverRound,
    RoundPlace,
    StoreRounds,
    launch_scope,
)
from zephon_chaos.harness_problem import HarnessGap, HarnessProblem
from zephon_chaos.workload.spec import WorkloadSpec


@dataclass(frozen=True)
class Meeting:
    """What a launch met of the ones before: the round left open in its namespace, whether
    the deployment's operator step cleared it, and a change the harness cannot account for."""

    round: LeftoverRound | None = None
    cleared: bool = False
    problems: tuple[HarnessProblem, ...] = ()


class Relaunches:
    """The world a scenario's launches share, seen between them."""

    def __init__(self, deployment: Deployment, job_dir: Path) -> None:
        self.deployment = deployment
        self.job_dir = job_dir
        self.place: RoundPlace | None = None
        self.scopes: tuple[str, ...] = ()
        self.left: tuple[object, ...] | None = None
        """Zephon's state at ``place`` as the last launch left it (None: nothing to hold to)."""
        self.found: tuple[object, ...] | None = None
        """Zephon's state at ``place`` as the next launch found it, before any operator step."""

    def directory(self, out: Path) -> Path:
        """``aggregate_dir`` of the launch writing to ``out``: the job's, or its own."""
        base = out / "aggregate" if self.deployment.aggregate_dir == "launch" else self.job_dir
        if self.place is None or getattr(self.place, "base", None) != base:
            self.place, self.left = DirRounds(base), None
        return base

    def use_store(self, endpoint: str) -> None:
        if self.place is None or getattr(self.place, "endpoint", None) != endpoint:
            self.place, self.left = StoreRounds(endpoint), None

    def fresh_store(self) -> None:
        """The store was replaced by an empty one (a fresh store per launch, as deployed, or
        a store a fault killed): nothing of the last launch's state is there to hold to."""
        self.left = None

    def before_launch(self, spec: WorkloadSpec, launch: int) -> Meeting:
        """What launch ``launch`` (``spec``) meets, and whether the operator step removed it."""
        scope = launch_scope(spec)
        if self.place is None or scope is None:
            return Meeting()
        changed: tuple[HarnessProblem, ...] = ()
        if self.left is not None:
            self.found = self.place.snapshot(self.scopes)  # the scopes the last snapshot read
            if self.found != self.left:
                changed = (
                    HarnessProblem(
                        HarnessGap.CHANGED_BETWEEN_LAUNCHES,
                        f"before launch {launch}, Zephon's state at {self._where()} is not "
                        "what the last launch left, and no step of the deployment changed it",
                    ),
                )
        self.scopes = tuple(dict.fromkeys((*self.scopes, scope)))
        met = self.place.open_round(scope)
        if met is not None and self.deployment.operator == "clear_failed_rounds":
            self.place.clear(met)
            return Meeting(met, True, changed)
        return Meeting(met, False, changed)

    def after_launch(self, serving: bool) -> None:
        """Hold to what the launch left (a store a fault left dead holds nothing)."""
        self.left = self.place.snapshot(self.scopes) if self.place and serving else None

    def _where(self) -> str:
        place = self.place
        return str(getattr(place, "base", None) or getattr(place, "endpoint", "?"))
