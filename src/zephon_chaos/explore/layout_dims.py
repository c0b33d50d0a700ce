"""The dimensions of a scenario's launches and data: how many launches, their sizes and DP x
TP layouts, launch paths, data and stages, checkpoints, trajectories, relaunches, resumes."""

from __future__ import annotations

from collections.abc import Iterator

from zephon_chaos.aims import Aim, AimKind
from zephon_chaos.dimensions.cells import (
    MAP_STAGES,
    Cell,
    Checkpoint,
    Declared,
    Dim,
    LayoutChange,
    Relaunch,
    Trajectory,
    Why,
    cell,
    layout_change,
    map_stage,
)
from zephon_chaos.dimensions.settings import Options
from zephon_chaos.explore.dimension import Declare, Dimension, first
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.strategies import (
    DATA_KINDS,
    DOWNSTREAM_PACK_ODDS,
    DOWNSTREAM_SHUFFLE_ODDS,
    EXHAUSTION_CHOICES,
    EXHAUSTION_ODDS,
    LAUNCH_CHOICES,
    PACK_ODDS,
    PACKINGS,
    SHUFFLE_ODDS,
    SHUFFLES,
    TP_CHOICES,
    tp_odds,
)

LAYOUT_AIMS = {
    LayoutChange.DP_ONLY: "dp-only",
    LayoutChange.TP_ONLY: "tp-only",
    LayoutChange.BOTH: "both",
}
"""Each layout change's pair of layouts (``aims.LAYOUT_PAIRS``)."""


def one_launch(o: Options) -> Why | None:
    return Why.ONE_LAUNCH if o.max_phases < 2 else None


def one_size(o: Options) -> Why | None:
    return Why.ONE_WORLD_SIZE if o.max_world < 2 else None


def accepted(scenario: Scenario) -> Iterator[tuple[int, Launch]]:
    """The launches Zephon accepts (no more DP groups than C), with their indices: a refused
    launch lands in its sizes and ``G > C`` alone."""
    for i, ph in enumerate(scenario.launches):
        if ph.dp <= scenario.canonical_replicas(i):
            yield i, ph


# ---- the launches and their layouts ---------------------------------------------------------
def _launches(o: Options) -> Iterator[Declared]:
    for n in range(1, o.max_phases + 1):
        yield Declared(cell(Dim.LAUNCHES, n))


def _launches_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    yield cell(Dim.LAUNCHES, len(s.launches))


def _world_sizes(o: Options) -> Iterator[Declared]:
    for g in range(1, o.max_world + 1):
        yield Declared(cell(Dim.WORLD_SIZE, g))


def _world_sizes_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for ph in s.launches:
        yield cell(Dim.WORLD_SIZE, ph.world_size)


def _tps(o: Options) -> Iterator[Declared]:
    for t, odd in zip(TP_CHOICES, tp_odds(o.tier, o.profile), strict=True):
        above = Why.TP_ABOVE_WORLD if t > o.max_world else None
        yield Declared(cell(Dim.TP, t), first(None if odd > 0 else Why.NO_ODDS, above))


def _tps_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for ph in s.launches:
        yield cell(Dim.TP, ph.tp)


def _layout_changes(o: Options) -> Iterator[Declared]:
    layouts = [(w // t, t) for w in range(1, o.max_world + 1) for t in TP_CHOICES if w % t == 0]
    for change in LayoutChange:
        found = any(layout_change(a, b) is change for a in layouts for b in layouts)
        yield Declared(
            cell(Dim.LAYOUT_CHANGE, change.value),
            first(one_launch(o), None if found else Why.NO_SUCH_LAYOUTS),
        )


def _layout_changes_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    laid_out: tuple[int, int] | None = None
    for _, ph in accepted(s):
        change = None if laid_out is None else layout_change(laid_out, (ph.dp, ph.tp))
        if change is not None:
            yield cell(Dim.LAYOUT_CHANGE, change.value)
        laid_out = (ph.dp, ph.tp)


def _layout_aim(c: Cell) -> Aim:
    return Aim(AimKind.LAYOUT, LAYOUT_AIMS[LayoutChange(c.value[0])])


def _launch_paths(o: Options) -> Iterator[Declared]:
    for path in LAUNCH_CHOICES:
        threads_cannot = o.inproc and path != LAUNCH_CHOICES[0]
        yield Declared(
            cell(Dim.LAUNCH_PATH, path), Why.THREADS_NO_LAUNCH_PATH if threads_cannot else None
        )


def _launch_paths_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for ph in s.launches:
        yield cell(Dim.LAUNCH_PATH, ph.path)


LAUNCHES: tuple[Dimension, ...] = (
    Dimension(Dim.LAUNCHES, _launches, _launches_landed),
    Dimension(Dim.WORLD_SIZE, _world_sizes, _world_sizes_landed),
    Dimension(Dim.TP, _tps, _tps_landed),
    Dimension(Dim.LAYOUT_CHANGE, _layout_changes, _layout_changes_landed, _layout_aim),
    Dimension(Dim.LAUNCH_PATH, _launch_paths, _launch_paths_landed),
)
"""Declared before the settings: how many launches, and how each is laid out and started."""


# ---- the data and its stages ----------------------------------------------------------------
def _data(o: Options) -> Iterator[Declared]:
    for kind in DATA_KINDS:
        for ex, odd in zip(EXHAUSTION_CHOICES, EXHAUSTION_ODDS, strict=True):
            yield Declared(cell(Dim.DATA, kind, ex), None if odd > 0 else Why.NO_ODDS)


def _data_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for src in s.data.sources:
        yield cell(Dim.DATA, src.kind, src.exhausted)


def _map_stages(o: Options) -> Iterator[Declared]:
    for stage in MAP_STAGES:
        yield Declared(cell(Dim.MAP_STAGE, stage))


def _map_stage_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    yield cell(Dim.MAP_STAGE, map_stage(s.data.stages))


def _stage(
    dim: Dim, choices: tuple[str, ...], odds: tuple[int, ...], down: tuple[int, ...]
) -> Declare:
    def declare(o: Options) -> Iterator[Declared]:
        for choice, odd in zip(choices, down if o.downstream else odds, strict=True):
            yield Declared(cell(dim, choice), None if odd > 0 else Why.NO_ODDS)

    return declare


def _packing_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    yield cell(Dim.PACKING, s.data.stages.pack)


def _shuffle_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    yield cell(Dim.SHUFFLE, s.data.stages.shuffle)


DATA: tuple[Dimension, ...] = (
    Dimension(Dim.DATA, _data, _data_landed),
    Dimension(Dim.MAP_STAGE, _map_stages, _map_stage_landed),
    Dimension(
        Dim.PACKING, _stage(Dim.PACKING, PACKINGS, PACK_ODDS, DOWNSTREAM_PACK_ODDS), _packing_landed
    ),
    Dimension(
        Dim.SHUFFLE,
        _stage(Dim.SHUFFLE, SHUFFLES, SHUFFLE_ODDS, DOWNSTREAM_SHUFFLE_ODDS),
        _shuffle_landed,
    ),
)


# ---- checkpoints, trajectories, relaunches and resumes --------------------------------------
def _checkpoints(o: Options) -> Iterator[Declared]:
    for cp in Checkpoint:
        yield Declared(cell(Dim.CHECKPOINT, cp.value))


def _checkpoints_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for cp in ph.checkpoints:
            kind = (
                Checkpoint.STEP_0
                if (cp.step, cp.extra) == (0, 0)
                else Checkpoint.MID_WINDOW
                if cp.extra
                else Checkpoint.BOUNDARY
            )
            yield cell(Dim.CHECKPOINT, kind.value)
    for run in outcome.phases if outcome is not None else ():
        for rec in run.records:
            dry = rec.exhausted_after
            if dry is not None and any(ev.after_batches >= dry for ev in rec.checkpoints):
                yield cell(Dim.CHECKPOINT, Checkpoint.AFTER_DRY.value)


def _trajectories(o: Options) -> Iterator[Declared]:
    for tr in Trajectory:
        resumes = tr in (Trajectory.SAME, Trajectory.GROWTH, Trajectory.SHRINK)
        yield Declared(
            cell(Dim.TRAJECTORY, tr.value),
            first(
                one_launch(o) if resumes else None,
                one_size(o) if tr is not Trajectory.SAME else None,
            ),
        )


def _trajectories_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    previous: int | None = None
    for i, ph in enumerate(s.launches):
        c = s.canonical_replicas(i)
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


def _relaunches(o: Options) -> Iterator[Declared]:
    no_faults = Why.FAULTS_OFF if not o.faults else None
    for rl in Relaunch:
        yield Declared(cell(Dim.RELAUNCH, rl.value), first(no_faults, one_launch(o)))


def _relaunches_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    last = len(s.launches) - 1
    for i, ph in accepted(s):
        if ph.rank_faults and not ph.max_restarts and i < last:
            yield cell(Dim.RELAUNCH, Relaunch.AFTER_CRASH.value)
            if s.restore_index(i) is None and i > 0:
                yield cell(Dim.RELAUNCH, Relaunch.SAME_CHECKPOINT.value)
                if s.run_id_policy == "fixed":
                    yield cell(Dim.RELAUNCH, Relaunch.SAME_RUN_ID.value)
        # A relaunch against the store a crashed or failed launch left (``store_explicit``:
        # it outlives the launches).
        ended = (ph.rank_faults and not ph.max_restarts) or ph.store_faults
        if ended and i < last and s.pipeline.aggregation == "store_explicit":
            yield cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value)


def _resumes(o: Options) -> Iterator[Declared]:
    for topology in ("same size", "resized"):
        for window in ("window boundary", "mid-window"):
            yield Declared(
                cell(Dim.RESUME, topology, window),
                first(one_launch(o), one_size(o) if topology == "resized" else None),
            )


def _resumes_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for r in outcome.resumes if outcome is not None else ():
        yield cell(
            Dim.RESUME,
            "resized" if r.resized else "same size",
            "mid-window" if r.mid_window else "window boundary",
        )


RESUMES: tuple[Dimension, ...] = (
    Dimension(Dim.CHECKPOINT, _checkpoints, _checkpoints_landed),
    Dimension(Dim.TRAJECTORY, _trajectories, _trajectories_landed),
    Dimension(Dim.RELAUNCH, _relaunches, _relaunches_landed),
    Dimension(Dim.RESUME, _resumes, _resumes_landed),
)
