"""The declared scenario space: every cell the strategies can draw, and where a scenario lands.

The cells come from the strategies' own constants (``zephon_chaos.strategies``), so a value
added to a strategy constant adds its cell here. A cell the strategies cannot reach for a
run's tier and options carries the reason (:class:`Why`); an exploration's counts map onto
the cells (:func:`cells_of`), so a report shows what never ran as well as what did.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from zephon_chaos.aims import SETTINGS, Aim, AimKind
from zephon_chaos.faults.dir_interposer import absent_on_dir
from zephon_chaos.faults.round_faults import RoundFaultLaunch
from zephon_chaos.oracles.faults import COMPLETED, FAILED, FINDING, SPLIT, SPLIT_RESOLVED
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.scenario_rules import (
    PROCESS_ENDING_ACTIONS,
    RESTART_ACTIONS,
    STALLING_TOXICS,
)
from zephon_chaos.strategies import (
    AGGREGATE_TIMEOUTS_S,
    AGGREGATION_CHOICES,
    AGGREGATION_ODDS,
    CODEC_ODDS,
    COMPRESSOR_CHOICES,
    DATA_KINDS,
    DOWNSTREAM_AGGREGATION_ODDS,
    DOWNSTREAM_MTP_ODDS,
    DOWNSTREAM_RUNNER_ODDS,
    EXHAUSTION_CHOICES,
    EXHAUSTION_ODDS,
    FOLLOWER_PHASES,
    INPROC_RUNNER_ODDS,
    LAG_RETRIES,
    LAUNCH_CHOICES,
    LEADER_PHASES,
    MAPPING_CHOICES,
    MTP_CHOICES,
    PERSIST_FORMATS,
    PREFETCH_CHOICES,
    PROCESS_FAULTS,
    RANK_FAULT_POINTS,
    RESTART_CHOICES,
    ROUND_FAULTS,
    RUN_ID_POLICIES,
    RUNNER_CHOICES,
    SERIALIZER_CHOICES,
    SHUTDOWN_CHOICES,
    SHUTDOWN_ODDS,
    STORE_FAULT_TIMEOUT_S,
    STORE_TOXICS,
    SYNC_CHOICES,
    THREAD_FAULTS,
    TORCHRUN_MTP_ODDS,
    TORCHRUN_RUNNER_ODDS,
    TP_CHOICES,
    persist_odds,
    tp_odds,
)
from zephon_chaos.workload.spec import AT_STEP, RETRIES, ROUND_PHASES

START = "start"
"""A link fault from the launch's start rather than at a round point."""
ROUND_POINTS: tuple[str, ...] = (START, *ROUND_PHASES)
FAULT_OUTCOMES: tuple[str, ...] = (COMPLETED, FAILED, SPLIT, SPLIT_RESOLVED, FINDING)
ROLES: tuple[str, ...] = ("leader", "follower")


class Dim(Enum):
    """A dimension of the space; its value is the label reports show."""

    LAUNCHES = "launches"
    WORLD_SIZE = "world size"
    TP = "tp (ranks per DP group)"
    LAYOUT_CHANGE = "DP x TP layout change across a resume"
    LAUNCH_PATH = "launch path"
    RUNNER = "runner"
    MTP = "mtp_mode"
    MAPPING = "mapping"
    AGGREGATION = "aggregation"
    PERSISTENCE = "persistence"
    SERIALIZER = "aggregate_serializer"
    COMPRESSOR = "aggregate_compressor"
    TIMEOUT = "aggregate_timeout_s"
    PREFETCH = "prefetch_batches"
    SHUTDOWN = "shutdown_mode"
    RUN_ID = "run_id"
    DATA = "data (kind, exhaustion)"
    CHECKPOINT = "checkpoint"
    TRAJECTORY = "trajectory"
    RELAUNCH = "relaunch"
    RESUME = "resume (topology, window)"
    RANK_FAULT = "rank fault"
    RANK_FAULT_POINT = "rank fault (action, step or round point, aggregation, retry)"
    RANK_FAULT_ROLE = "rank fault at a round point (point, rank role)"
    RANK_FAULT_OUTCOME = "rank fault at a round point: outcome"
    STORE_FAULT = "store fault (toxic, point, aggregation, retry)"
    STORE_FAULT_ROLE = "store fault (point, rank role)"
    STORE_FAULT_OUTCOME = "store fault outcome"
    SYNC = "sync (how ranks arrive at a checkpoint)"
    LAG = "lag (who is late, policy after the late round)"
    HOSTED_STORE_FAULT = "hosted store fault (action, round point)"
    HOSTED_STORE_OUTCOME = "hosted store fault outcome"
    RESTARTS = "torchrun --max-restarts"


class Checkpoint(Enum):
    STEP_0 = "at step 0, before the first batch"
    BOUNDARY = "on a step boundary"
    MID_WINDOW = "mid-window (step + extra batches)"
    AFTER_DRY = "after the data ran out"


class Trajectory(Enum):
    SAME = "same size"
    GROWTH = "growth"
    SHRINK = "shrink"
    NOT_DIVIDING = "G does not divide C"
    ABOVE_C = "G > C (refusal expected)"


class LayoutChange(Enum):
    """How a resume changes a DP x TP layout (beside plain resizes of one rank per group)."""

    DP_ONLY = "DP changes, TP fixed (> 1)"
    TP_ONLY = "TP changes, DP fixed"
    BOTH = "DP and TP change"


class Relaunch(Enum):
    AFTER_CRASH = "after a crash"
    SAME_CHECKPOINT = "after a crash before any checkpoint: from the same checkpoint"
    SAME_RUN_ID = "after a crash before any checkpoint: same checkpoint, same run_id"
    SURVIVING_STORE = "after a crash or a failed round, against the hosted store it left"


class Why(Enum):
    """Why the strategies cannot reach a cell for this run's tier and options."""

    THREADS_NO_LAUNCH_PATH = "threads have no torchrun launch path (standalone only)"
    THREADS_NO_WORKERS = "threads start no worker processes (runner process, mtp_mode)"
    THREADS_NO_PROCESS_FAULT = "a signal or exit ends a process; in-process ranks are threads"
    NO_ODDS = "the strategies give it no odds on this tier and profile"
    THREADS_NO_PROCESS_GROUP = "dcp saves over a process group: in-process ranks have none"
    DCP_WITH_LINK_FAULTS = "no dcp beside link faults: a split outcome would block its save"
    FAULTS_OFF = "rank faults are off for this run"
    ONE_LAUNCH = "max_phases is 1: nothing is relaunched or resumed"
    ONE_WORLD_SIZE = "max_world is 1: one size, dividing every C, never above C"
    THREAD_STALL = (
        "a stalled link holds a rank thread inside the C++ store client until the launch's "
        "deadline: the in-process tier draws no stalling toxic (torchrun does)"
    )
    STORE_FAULTS_OFF = "store faults are off (explore --store-faults)"
    ENDS_GROUP = (
        "an exit, SIGKILL or SIGTERM ends its rank, and torchrun's agent the group, before any "
        "round could fail and be retried: such a launch's retry policy is always none"
    )
    ONE_RANK = "a link fault needs two ranks: a single rank never contacts the store"
    DIR_NO_STORE = "aggregate_dir has no store traffic to fault"
    DIR_NO_PARTICIPANTS = (
        "aggregate_dir has no participants write: the leader lists the round's shard files"
    )
    RESET_AT_START = "a reset at start resets nothing: the strategies move it to the first round"
    LEADER_ONLY = "only the leader (rank 0) announces a round and publishes its outcome"
    FOLLOWER_ONLY = "only followers acknowledge; the leader writes no ack"
    TP_ABOVE_WORLD = "no world size up to max_world holds a DP group of that many ranks"
    NO_SUCH_LAYOUTS = "no two layouts up to max_world differ that way"
    THREADS_START_TOGETHER = (
        "threads start together and never meet: in process 'free' means what 'lockstep' means"
    )
    LAG_NEEDS_TWO = "a lag needs two ranks: one is late for the other"
    STOP_AT_STEP = "a stop at a step has nothing to continue it: drawn at round points only"
    RETRY_NEEDS_ROUND = "a retry policy needs a failed round; a step fault ends the launch"
    HOSTED_STORE_INPROC = "the hosted store is faulted as a process of its own (torchrun tier)"
    THREADS_NO_AGENT = "torchrun's agent restarts the workers; rank threads have no agent"


@dataclass(frozen=True)
class Cell:
    """One value (or combination of values) of one dimension."""

    dim: Dim
    value: tuple[str, ...]

    def label(self) -> str:
        return ", ".join(self.value)


@dataclass(frozen=True)
class Declared:
    cell: Cell
    why_not: Why | None = None
    """None: the strategies can reach it; else the reason they cannot."""


@dataclass(frozen=True)
class Space:
    tier: str
    max_world: int
    max_phases: int
    faults: bool
    store_faults: bool
    cells: tuple[Declared, ...]

    @cached_property
    def _reasons(self) -> dict[Cell, Why | None]:
        return {d.cell: d.why_not for d in self.cells}

    def reachable(self) -> list[Cell]:
        return [d.cell for d in self.cells if d.why_not is None]

    def unreachable(self) -> list[Declared]:
        return [d for d in self.cells if d.why_not is not None]

    def why_not(self, cell: Cell) -> Why | None:
        return self._reasons.get(cell)

    def __contains__(self, cell: object) -> bool:
        return cell in self._reasons

    def dims(self) -> list[Dim]:
        """The dimensions in declaration order."""
        return list(dict.fromkeys(d.cell.dim for d in self.cells))


def cell(dim: Dim, *value: object) -> Cell:
    return Cell(dim, tuple(str(v) for v in value))


def _first(*reasons: Why | None) -> Why | None:
    return next((r for r in reasons if r is not None), None)


def declare(
    tier: str,
    max_world: int = 4,
    max_phases: int = 5,
    faults: bool = True,
    store_faults: bool = False,
    profile: str = "default",
) -> Space:
    """Every cell of every dimension for ``tier`` and these strategy options."""
    inproc = tier == "inproc"
    downstream = profile == "downstream" and not inproc
    one_launch = Why.ONE_LAUNCH if max_phases < 2 else None
    one_size = Why.ONE_WORLD_SIZE if max_world < 2 else None
    out: list[Declared] = []

    def add(c: Cell, *reasons: Why | None) -> None:
        out.append(Declared(c, _first(*reasons)))

    for n in range(1, max_phases + 1):
        add(cell(Dim.LAUNCHES, n))
    for g in range(1, max_world + 1):
        add(cell(Dim.WORLD_SIZE, g))
    t_odds = tp_odds(tier, profile)  # type: ignore[arg-type]
    for t, odd in zip(TP_CHOICES, t_odds, strict=True):
        add(cell(Dim.TP, t), None if odd > 0 else Why.NO_ODDS, _tp_reason(t, max_world))
    for change in LayoutChange:
        add(cell(Dim.LAYOUT_CHANGE, change.value), one_launch, _change_reason(change, max_world))
    for path in LAUNCH_CHOICES:
        threads_cannot = inproc and path != LAUNCH_CHOICES[0]
        add(cell(Dim.LAUNCH_PATH, path), Why.THREADS_NO_LAUNCH_PATH if threads_cannot else None)
    odds = (
        INPROC_RUNNER_ODDS
        if inproc
        else DOWNSTREAM_RUNNER_ODDS
        if downstream
        else TORCHRUN_RUNNER_ODDS
    )
    for runner, odd in zip(RUNNER_CHOICES, odds, strict=True):
        add(cell(Dim.RUNNER, runner), _no_odds(odd, inproc))
    mtp_odds = (
        (1, *(0 for _ in MTP_CHOICES[1:]))
        if inproc
        else DOWNSTREAM_MTP_ODDS
        if downstream
        else TORCHRUN_MTP_ODDS
    )
    for mode, odd in zip(MTP_CHOICES, mtp_odds, strict=True):
        add(cell(Dim.MTP, mode), _no_odds(odd, inproc))
    for m in MAPPING_CHOICES:
        add(cell(Dim.MAPPING, m))
    store_only = store_faults and not inproc
    agg_odds = DOWNSTREAM_AGGREGATION_ODDS if downstream else AGGREGATION_ODDS
    for agg, odd in zip(AGGREGATION_CHOICES, agg_odds, strict=True):
        add(cell(Dim.AGGREGATION, agg), None if odd > 0 else Why.NO_ODDS)
    fmt_odds = persist_odds(tier, store_only, profile)  # type: ignore[arg-type]
    for fmt, odd in zip(PERSIST_FORMATS, fmt_odds, strict=True):
        add(
            cell(Dim.PERSISTENCE, fmt),
            None
            if odd > 0
            else Why.THREADS_NO_PROCESS_GROUP
            if inproc
            else Why.DCP_WITH_LINK_FAULTS
            if store_only
            else Why.NO_ODDS,
        )
    for dim, choices, codec_odds in (
        (Dim.SERIALIZER, SERIALIZER_CHOICES, CODEC_ODDS),
        (Dim.COMPRESSOR, COMPRESSOR_CHOICES, CODEC_ODDS),
        (Dim.SHUTDOWN, SHUTDOWN_CHOICES, SHUTDOWN_ODDS),
    ):
        for choice, odd in zip(choices, codec_odds, strict=True):
            add(cell(dim, choice), None if odd > 0 else Why.NO_ODDS)
    for timeout in (*AGGREGATE_TIMEOUTS_S, STORE_FAULT_TIMEOUT_S):
        # The short timeout of a scenario with link faults or a round-point rank fault.
        fault_only = timeout not in AGGREGATE_TIMEOUTS_S
        round_rank_faults = faults and max_world >= 2
        reason = _store_reason(store_faults, max_world) if fault_only else None
        add(cell(Dim.TIMEOUT, timeout), None if round_rank_faults else reason)
    for prefetch in PREFETCH_CHOICES:
        add(cell(Dim.PREFETCH, prefetch))
    for policy in RUN_ID_POLICIES:
        add(cell(Dim.RUN_ID, policy))
    for kind in DATA_KINDS:
        for ex, odd in zip(EXHAUSTION_CHOICES, EXHAUSTION_ODDS, strict=True):
            add(cell(Dim.DATA, kind, ex), None if odd > 0 else Why.NO_ODDS)
    for cp in Checkpoint:
        add(cell(Dim.CHECKPOINT, cp.value))
    for tr in Trajectory:
        resumes = tr in (Trajectory.SAME, Trajectory.GROWTH, Trajectory.SHRINK)
        add(
            cell(Dim.TRAJECTORY, tr.value),
            one_launch if resumes else None,
            one_size if tr is not Trajectory.SAME else None,
        )
    no_faults = Why.FAULTS_OFF if not faults else None
    for rl in Relaunch:
        add(cell(Dim.RELAUNCH, rl.value), no_faults, one_launch)
    for topology in ("same size", "resized"):
        for window in ("window boundary", "mid-window"):
            add(
                cell(Dim.RESUME, topology, window),
                one_launch,
                one_size if topology == "resized" else None,
            )
    drawn_faults = THREAD_FAULTS if inproc else ROUND_FAULTS
    not_drawn = Why.THREADS_NO_PROCESS_FAULT if inproc else Why.NO_ODDS
    all_actions = dict.fromkeys((*PROCESS_FAULTS, *ROUND_FAULTS, *THREAD_FAULTS))
    for action in all_actions:
        add(cell(Dim.RANK_FAULT, action), no_faults, None if action in drawn_faults else not_drawn)
    for action in all_actions:
        for point in RANK_FAULT_POINTS:
            for agg in AGGREGATION_CHOICES:
                for retry in RETRIES:
                    at_step = point == AT_STEP
                    add(
                        cell(Dim.RANK_FAULT_POINT, action, point, agg, retry),
                        no_faults,
                        None if action in drawn_faults else not_drawn,
                        Why.STOP_AT_STEP if at_step and action not in PROCESS_FAULTS else None,
                        Why.RETRY_NEEDS_ROUND if at_step and retry != RETRIES[0] else None,
                        Why.ENDS_GROUP
                        if action in PROCESS_ENDING_ACTIONS and retry != RETRIES[0]
                        else None,
                        Why.DIR_NO_PARTICIPANTS
                        if agg == "dir" and not at_step and absent_on_dir(point) is not None
                        else None,
                        None if at_step else one_rank(max_world),
                    )
    round_faults = no_faults or one_rank(max_world)
    for point in ROUND_PHASES:
        for role in ROLES:
            add(cell(Dim.RANK_FAULT_ROLE, point, role), round_faults, _role_reason(point, role))
    for outcome in FAULT_OUTCOMES:
        add(cell(Dim.RANK_FAULT_OUTCOME, outcome), round_faults)
    store = _store_reason(store_faults, max_world)
    for toxic in STORE_TOXICS:
        for point in ROUND_POINTS:
            for agg in AGGREGATION_CHOICES:
                for retry in RETRIES:
                    add(
                        cell(Dim.STORE_FAULT, toxic, point, agg, retry),
                        store,
                        Why.THREAD_STALL if inproc and toxic in STALLING_TOXICS else None,
                        Why.DIR_NO_STORE if agg == "dir" else None,
                        Why.RESET_AT_START if toxic == "reset_peer" and point == START else None,
                    )
    for point in ROUND_POINTS:
        for role in ROLES:
            add(cell(Dim.STORE_FAULT_ROLE, point, role), store, _role_reason(point, role))
    for outcome in FAULT_OUTCOMES:
        add(cell(Dim.STORE_FAULT_OUTCOME, outcome), store)
    out += _hosted_declared(inproc, faults, max_world, max_phases)
    for sync in SYNC_CHOICES:
        free = sync != SYNC_CHOICES[0]
        add(
            cell(Dim.SYNC, sync),
            Why.THREADS_START_TOGETHER if inproc and free else None,
            Why.LAG_NEEDS_TWO if free and max_world < 2 else None,
        )
    for role in ROLES:
        for retry in LAG_RETRIES:
            add(
                cell(Dim.LAG, role, retry),
                Why.THREADS_START_TOGETHER if inproc else None,
                no_faults,
                Why.LAG_NEEDS_TWO if max_world < 2 else None,
            )
    return Space(tier, max_world, max_phases, faults, store_faults, tuple(out))


def one_rank(max_world: int) -> Why | None:
    return Why.ONE_RANK if max_world < 2 else None


def _tp_reason(tp: int, max_world: int) -> Why | None:
    return Why.TP_ABOVE_WORLD if tp > max_world else None


def layout_change(before: tuple[int, int], after: tuple[int, int]) -> LayoutChange | None:
    """How (dp, tp) ``before`` becomes ``after``; None when unchanged or one rank per group."""
    (dp0, tp0), (dp1, tp1) = before, after
    if max(tp0, tp1) == 1 or (dp0, tp0) == (dp1, tp1):
        return None
    if tp0 == tp1:
        return LayoutChange.DP_ONLY
    return LayoutChange.TP_ONLY if dp0 == dp1 else LayoutChange.BOTH


def _change_reason(change: LayoutChange, max_world: int) -> Why | None:
    layouts = [(w // t, t) for w in range(1, max_world + 1) for t in TP_CHOICES if w % t == 0]
    found = any(layout_change(a, b) is change for a in layouts for b in layouts)
    return None if found else Why.NO_SUCH_LAYOUTS


def _no_odds(odd: int, inproc: bool) -> Why | None:
    if odd > 0:
        return None
    return Why.THREADS_NO_WORKERS if inproc else Why.NO_ODDS


def _store_reason(store_faults: bool, max_world: int) -> Why | None:
    if not store_faults:
        return Why.STORE_FAULTS_OFF
    return Why.ONE_RANK if max_world < 2 else None


def _role_reason(point: str, role: str) -> Why | None:
    if point in LEADER_PHASES and role != "leader":
        return Why.LEADER_ONLY
    if point in FOLLOWER_PHASES and role != "follower":
        return Why.FOLLOWER_ONLY
    return None


# ---- where a scenario lands ----------------------------------------------------------------
def cells_of(scenario: Scenario, outcome: ScenarioOutcome | None) -> set[Cell]:
    """The cells ``scenario`` (and what its run showed) exercised; each once."""
    return set(_cells(scenario, outcome))


def _cells(scenario: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    p = scenario.pipeline
    yield cell(Dim.LAUNCHES, len(scenario.phases))
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
    yield cell(Dim.RUN_ID, scenario.run_id_policy)
    for src in scenario.data.sources:
        yield cell(Dim.DATA, src.kind, src.exhausted)
    yield from _phase_cells(scenario)
    if outcome is not None:
        yield from _outcome_cells(outcome)


def _phase_cells(scenario: Scenario) -> Iterator[Cell]:
    previous: int | None = None
    laid_out: tuple[int, int] | None = None
    for i, ph in enumerate(scenario.phases):
        c = scenario.canonical_replicas(i)
        yield cell(Dim.WORLD_SIZE, ph.world_size)
        yield cell(Dim.TP, ph.tp)
        yield cell(Dim.LAUNCH_PATH, ph.launch)
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
        for pf in ph.proxy_faults:
            point = pf.at.partition("#")[0]
            yield cell(Dim.STORE_FAULT, pf.toxic, point, scenario.pipeline.aggregation, ph.retry)
            yield cell(Dim.STORE_FAULT_ROLE, point, ROLES[0] if pf.rank == 0 else ROLES[1])
        yield from _hosted_cells(scenario, i)
        if ph.rank_faults and not ph.max_restarts and i < len(scenario.phases) - 1:
            yield cell(Dim.RELAUNCH, Relaunch.AFTER_CRASH.value)
            if scenario.restore_index(i) is None and i > 0:
                yield cell(Dim.RELAUNCH, Relaunch.SAME_CHECKPOINT.value)
                if scenario.run_id_policy == RUN_ID_POLICIES[0]:
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


LAYOUT_AIMS = {
    LayoutChange.DP_ONLY: "dp-only",
    LayoutChange.TP_ONLY: "tp-only",
    LayoutChange.BOTH: "both",
}
"""Each layout change's pair of layouts (``aims.LAYOUT_PAIRS``)."""


def aim_at(c: Cell) -> Aim | None:
    """The aim that lands a launch in fault cell ``c``; None for a cell no aim targets."""
    v = c.value
    if c.dim is Dim.RANK_FAULT_POINT:
        return Aim(AimKind.RANK, v[0], v[1], v[2], v[3])  # type: ignore[arg-type]
    if c.dim is Dim.STORE_FAULT:
        return Aim(AimKind.LINK, v[0], v[1], v[2], v[3])  # type: ignore[arg-type]
    if c.dim is Dim.HOSTED_STORE_FAULT:
        return Aim(AimKind.HOSTED, v[0], v[1], "store_explicit")
    if c.dim is Dim.RANK_FAULT_ROLE:
        return Aim(AimKind.RANK, "raise", v[0], role=v[1])  # type: ignore[arg-type]
    if c.dim is Dim.STORE_FAULT_ROLE:
        return Aim(AimKind.LINK, "latency", v[0], role=v[1])  # type: ignore[arg-type]
    if c.dim is Dim.LAG:
        return Aim(AimKind.LAG, retry=v[1], role=v[0])  # type: ignore[arg-type]
    if c.dim is Dim.RESTARTS and v[0] != str(RESTART_CHOICES[0]):
        return Aim(AimKind.RESTART, RESTART_ACTIONS[1], AT_STEP)
    if c.dim is Dim.LAYOUT_CHANGE:
        return Aim(AimKind.LAYOUT, LAYOUT_AIMS[LayoutChange(v[0])])
    if c.dim is Dim.MTP and v[0] == MTP_CHOICES[1]:
        return Aim(AimKind.SETTING, SETTINGS[0])
    if c.dim is Dim.RUNNER and v[0] == RUNNER_CHOICES[2]:
        return Aim(AimKind.SETTING, SETTINGS[1])
    return None


def aims(space: Space, counts: Mapping[Cell, int]) -> tuple[Aim, ...]:
    """Aims at the reachable fault cells ``counts`` never reached, in declaration order so
    that a round's draws are reproducible; none once every one was reached (the search then
    draws as the strategies' odds fall, steered by ``target()`` alone).

    Breadth first: while some group of aims (``Aim.group``: a fault kind and action, a lag,
    a setting) has no cell reached at all, only those groups are aimed at, so that a slow
    tier's few scenarios exercise every kind of fault before filling in its products."""
    aimable = [(c, a) for c in space.reachable() if (a := aim_at(c)) is not None]
    touched = {a.group for c, a in aimable if counts.get(c, 0)}
    holes = [a for c, a in aimable if not counts.get(c, 0)]
    untouched = [a for a in holes if a.group not in touched]
    return tuple(untouched or holes)


# ---- the harness-hosted store's faults and torchrun's restarts -----------------------------
def _hosted_declared(inproc: bool, faults: bool, max_world: int, max_phases: int) -> list[Declared]:
    """Cells of hosted-store faults, their outcomes, restarts and the surviving-store relaunch."""
    from zephon_chaos.strategies import HOSTED_STORE_ACTIONS, HOSTED_STORE_POINTS

    off = Why.FAULTS_OFF if not faults else None
    store = _first(Why.HOSTED_STORE_INPROC if inproc else None, off)
    store = store or (Why.ONE_RANK if max_world < 2 else None)
    out = [
        Declared(cell(Dim.HOSTED_STORE_FAULT, action, point), store)
        for action in HOSTED_STORE_ACTIONS
        for point in HOSTED_STORE_POINTS
    ]
    out += [
        Declared(cell(Dim.HOSTED_STORE_OUTCOME, o), store) for o in (COMPLETED, FAILED, FINDING)
    ]
    agent = _first(Why.THREADS_NO_AGENT if inproc else None, off)
    out += [
        Declared(cell(Dim.RESTARTS, n), None if n == RESTART_CHOICES[0] else agent)
        for n in RESTART_CHOICES
    ]
    relaunch = _first(off, Why.ONE_LAUNCH if max_phases < 2 else None)
    out.append(Declared(cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value), relaunch))
    return out


def _hosted_cells(scenario: Scenario, i: int) -> Iterator[Cell]:
    """Launch ``i``'s hosted-store fault and restarts, and a relaunch against the store a
    crashed or failed launch left (``store_explicit``: it outlives the launches)."""
    ph = scenario.phases[i]
    for f in ph.store_faults:
        yield cell(Dim.HOSTED_STORE_FAULT, f.action, f.at.partition("#")[0])
    yield cell(Dim.RESTARTS, ph.max_restarts)
    ended = (ph.rank_faults and not ph.max_restarts) or ph.store_faults
    if ended and i < len(scenario.phases) - 1 and scenario.pipeline.aggregation == "store_explicit":
        yield cell(Dim.RELAUNCH, Relaunch.SURVIVING_STORE.value)
