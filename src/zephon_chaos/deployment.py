"""How a job is deployed around Zephon: what a relaunch meets, as a real job leaves it.

A torchtitan-zephon job reads one ``aggregate_dir`` (``ZEPHON_AGGREGATE_DIR``) and one
``run_id`` (``ZEPHON_RUN_ID``) for the whole job, so every torchrun restart and every
relaunch after a crash meets what its predecessors left, failed rounds included; nobody
cleans up between a crash and torchrun's automatic restart. :data:`DOWNSTREAM` is that
world, and the default of every scenario. The other values are deployments a recipe may
choose (a run id per restart, a store per launch) or an operator step it may model.

The harness itself repairs nothing: between launches it changes Zephon's state (store keys,
directory files) only through a step named here (:attr:`Deployment.operator`), a fresh
store or directory a :attr:`Deployment.aggregate_dir` / :attr:`Deployment.hosted_store`
scope of ``launch`` names, or a store fault's own consequence (a killed store comes back
empty).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Scope = Literal["job", "launch"]
"""``job``: one for every launch of the scenario (the recipe's default); ``launch``: a fresh
one per launch (a scheduler that gives each relaunch its own)."""
RunIdPolicy = Literal["fixed", "per_restart", "per_launch"]
"""``fixed``: the config's run id for the whole job (torchtitan-zephon's ``ZEPHON_RUN_ID``);
``per_restart``: the run id plus ``TORCHELASTIC_RESTART_COUNT``, so a torchrun restart gets
its own rounds (every rank agrees on the count on one node; the agents of a multi-node job
count for themselves, hence the adapter proposal in docs/upstream/dead-round-meets-relaunch.md
of a name rank 0 broadcasts); ``per_launch``: a new one per launch (a scheduler's job id)."""
Operator = Literal["none", "clear_failed_rounds"]
"""``none``: nobody touches Zephon's rounds between launches (a real automatic restart);
``clear_failed_rounds``: before a relaunch, an operator deletes the announcement of a round
that has no outcome in the namespace the relaunch will use, as Zephon's
``RoundCoordinator.cleanup`` leaves to "manual cleanup once every participant has stopped"."""

SCOPES: tuple[Scope, ...] = get_args(Scope)
RUN_ID_POLICIES: tuple[RunIdPolicy, ...] = get_args(RunIdPolicy)
OPERATORS: tuple[Operator, ...] = get_args(Operator)


@dataclass(frozen=True)
class Deployment:
    """What outlives a launch, and who may touch it between launches."""

    aggregate_dir: Scope = "job"
    """Lifetime of ``aggregate_dir`` (aggregation ``dir``)."""
    hosted_store: Scope = "job"
    """Lifetime of the harness-hosted store (aggregation ``store_explicit``). torchrun's own
    store (``torch://``) lives as long as the agent: across ``--max-restarts`` restarts of
    the workers, never across relaunches."""
    run_id: RunIdPolicy = "fixed"
    operator: Operator = "none"

    def invalid(self) -> tuple[str, str] | None:
        """The first field with a value no run can use, and what it must be (None: valid)."""
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                return name, f"must be one of {', '.join(allowed)}"
        return None

    def launch_run_id(self, base: str, launch: int) -> str:
        """The run id launch ``launch`` configures (a restart's suffix is the rank's own)."""
        return f"{base}-l{launch}" if self.run_id == "per_launch" else base


CHOICES: dict[str, tuple[str, ...]] = {
    "aggregate_dir": SCOPES,
    "hosted_store": SCOPES,
    "run_id": RUN_ID_POLICIES,
    "operator": OPERATORS,
}
"""Each field's values, the default first: what validation accepts and the strategies draw."""

DOWNSTREAM = Deployment()
"""torchtitan-zephon's defaults: one directory, one run id, nobody cleaning up."""

BEFORE_VERSION_2 = Deployment(aggregate_dir="launch", operator="clear_failed_rounds")
"""What scenario files of version 1 ran under: a fresh directory per launch, and the harness
clearing a dead launch's open round before a relaunch into the hosted store. A version-1 file
replays as it was found."""
