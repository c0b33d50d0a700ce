"""Where a scenario lands in the declared space (its cells), and how rare that is."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from zephon_chaos.deployment import CHOICES as DEPLOYMENT_CHOICES
from zephon_chaos.explore.cells import (
    CHILD_WHEN,
    ROLES,
    Cell,
    Checkpoint,
    Dim,
    Relaunch,
    Trajectory,
    cell,
    layout_change,
    map_stage,
)
from zephon_chaos.explore.space import Space
from zephon_chaos.nemeses.round_faults import RoundFaultLaunch
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.strategies import (
    MTP_CHOICES,
)


def cells_of(scenario: Scenario, outcome: ScenarioOutcome | None) -> set[Cell]:
    """The cells ``scenario`` (and what its run showed) exercised; each once."""
    return set(_cells(scenario, outcome))


def _cells(scenario: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    p = scenario.pipeline
    yield cell(Dim.LAUNCHES, len(scenario.launches))
    yield cell(Dim.RUNNER, p.runner)
    yield cell(Dim.MTP, MTP_CHOICES[1] if p.mtp_mode else MTP_CHOICES[0])
    yield cell(Dim.MAPPING, p.mapping)
    yield cell(Dim.AGGREGATION, p.aggregation)
    yield cell(Dim.PERSISTENCE, scenario.persist_format)
    yield cell(Dim.SERIALIZER, p.aggregate_serializer)
    yield cell(Dim.COMPRESSOR, p.aggregate_compressor)
    yield cell(Dim.TIMEOUT, p.aggregate_timeout_s)
    yield cell(Dim.PREFETCH, p.prefetch_batches)
    yield cell(Dim.SHUTDOWN, p.shutdown_mode)
    for name in DEPLOYMENT_CHOICES:
        yield cell(Dim.DEPLOYMENT, name, getattr(scenario.deployment, name))
    for src in scenario.data.sources:
        yield cell(Dim.DATA, src.kind, src.exhausted)
    stages = scenario.data.stages
    yield cell(Dim.MAP_STAGE, map_stage(stages))
    yield cell(Dim.PACKING, stages.pack)
    yield cell(Dim.SHUFFLE, stages.shuffle)
    yield from _phase_cells(scenario)
    if outcome is not None:
        yield from _outcome_cells(outcome)


def _phase_cells(scenario: Scenario) -> Iterator[Cell]:
    previous: int | None = None
    laid_out: tuple[int, int] | None = None
    for i, ph in enumerate(scenario.launches):
        c = scenario.canonical_replicas(i)
        yield cell(Dim.WORLD_SIZE, ph.world_size)
        yield cell(Dim.TP, ph.tp)
        yield cell(Dim.LAUNCH_PATH, ph.path)
        if ph.dp > c:  # Zephon counts DP groups (ranks, when tp is 1) against C
            yield cell(Dim.TRAJECTORY, Trajectory.ABOVE_C.value)
            continue
        if c % ph.dp:
            yield cell(Dim.TRAJECTORY, Trajectory.NOT_DIVIDING.value)
        if previous is not None:
            tr = (
                Trajectory.SAME
                if ph.world_size == previous
                else Trajectory.GROWTH
                if ph.world_size > previous
                else Trajectory.SHRINK
            )
            yield cell(Dim.TRAJECTORY, tr.value)
        previous = ph.world_size
        change = None if laid_out is None else layout_change(laid_out, (ph.dp, ph.tp))
        if change is not None:
            yield cell(Dim.LAYOUT_CHANGE, change.value)
        laid_out = (ph.dp, ph.tp)
        for cp in ph.checkpoints:
            kind = (
                Checkpoint.STEP_0
                if (cp.step, cp.extra) == (0, 0)
                else Checkpoint.MID_WINDOW
                if cp.extra
                else Checkpoint.BOUNDARY
            )
            yield cell(Dim.CHECKPOINT, kind.value)
        for f in ph.rank_faults:
            point = f.at.partition("#")[0]
            yield cell(Dim.RANK_FAULT, f.action)
            agg = scenario.pipeline.aggregation
            yield cell(Dim.RANK_FAULT_POINT, f.action, point, agg, ph.retry)
            if f.at_round:
                yield cell(Dim.RANK_FAULT_ROLE, point, ROLES[0] if f.rank == 0 else ROLES[1])
        yield cell(Dim.SYNC, ph.sync)
        for lag in ph.lags:
            yield cell(Dim.LAG, ROLES[0] if lag.rank == 0 else ROLES[1], ph.retry)
            if lag.by:
                yield cell(Dim.DRIFT, ph.retry)
        for pf in ph.proxy_faults:
            point = pf.at.partition("#")[0]
            yield cell(Dim.STORE_FAULT, pf.toxic, point, scenario.pipeline.aggregation, ph.retry)
            yield cell(Dim.STORE_FAULT_ROLE, point, ROLES[0] if pf.rank == 0 else ROLES[1])
            if pf.heals:
                yield cell(Dim.STORE_FAULT_HEAL, pf.toxic, point, pf.until)
        yield from _hosted_cells(scenario, i)
        if ph.rank_faults and not ph.max_restarts and i < len(scenario.launches) - 1:
            yield cell(Dim.RELAUNCH, Relaunch.AFTER_CRASH.value)
            if scenario.restore_index(i) is None and i > 0:
                yield cell(Dim.RELAUNCH, Relaunch.SAME_CHECKPOINT.value)
                if scenario.run_id_policy == "fixed":
                    yield cell(Dim.RELAUNCH, Relaunch.SAME_RUN_ID.value)


def _outcome_cells(outcome: ScenarioOutcome) -> Iterator[Cell]:
    for r in outcome.resumes:
        yield cell(
            Dim.RESUME,
            "resized" if r.resized else "same size",
            "mid-window" if r.mid_window else "window boundary",
        )
    for run in outcome.phases:
        if run.phase.store_faults and run.fault is not None and run.fault.verdict is not None:
            yield cell(Dim.HOSTED_STORE_OUTCOME, run.fault.verdict.outcome)
        elif run.fault is not None and run.fault.verdict is not None:
            dim = (
                Dim.RANK_FAULT_OUTCOME
                if isinstance(run.fault, RoundFaultLaunch)
                else Dim.STORE_FAULT_OUTCOME
            )
            yield cell(dim, run.fault.verdict.outcome)
        healing = getattr(run.fault, "healing", None)  # a link-faulted launch's, if it heals
        if healing is not None:
            yield cell(Dim.STORE_FAULT_HEAL_OUTCOME, healing.outcome.value)
        for rec in run.records:
            dry = rec.exhausted_after
            if dry is not None and any(ev.after_batches >= dry for ev in rec.checkpoints):
                yield cell(Dim.CHECKPOINT, Checkpoint.AFTER_DRY.value)


def rarity(cells: Iterable[Cell], counts: Mapping[Cell, int], space: Space | None) -> float:
    """How rare the rarest of ``cells`` is under ``counts``: 1 / (1 + its count), over the
    reachable cells. The rarest, not a sum: a sum would favour scenarios with more cells,
    that is longer ones, and slow the search down."""
    return max(
        (
            1.0 / (1 + counts.get(c, 0))
            for c in cells
            if space is None or (c in space and space.why_not(c) is None)
        ),
        default=0.0,
    )


def _hosted_cells(scenario: Scenario, i: int) -> Iterator[Cell]:
    """Launch ``i``'s hosted-store fault and restarts, and a relaunch against the store a
    crashed or failed launch left (``store_explicit``: it outlives the launches)."""
    ph = scenario.launches[i]
    for f in ph.store_faults:
        yield cell(Dim.HOSTED_STORE_FAULT, f.action, f.at.partition("#")[0])
    for child in ph.child_faults:
        yield cell(Dim.CHILD_FAULT, child.target, CHILD_WHEN[child.at_step >= ph.steps])
    yield cell(Dim.RESTARTS, ph.max_restarts)
    ended = (ph.rank_faults and not ph.max_restarts) or ph.store_faults
    if (
        ended
        and i < len(scenario.launches) - 1
        and scenario.pipeline.aggregation == "store_explicit"
    ):
        yield cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value)
