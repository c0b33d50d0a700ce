"""The declared scenario space: every cell the strategies can draw, and why not where not.

The cells come from the strategies' own constants (``zephon_chaos.strategies``), so a value
added to a strategy constant adds its cell here. A cell the strategies cannot reach for a
run's tier and options carries the reason (``cells.Why``); an exploration's counts map onto
the cells (``landing.cells_of``), so a report shows what never ran as well as what did.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from zephon_chaos.explore.cells import (
    CHILD_WHEN,
    FAULT_OUTCOMES,
    HEAL_OUTCOMES,
    MAP_STAGES,
    ROLES,
    ROUND_POINTS,
    START,
    Cell,
    Checkpoint,
    Dim,
    LayoutChange,
    Relaunch,
    Trajectory,
    Why,
    cell,
    layout_change,
)
from zephon_chaos.faults.dir_interposer import absent_on_dir
from zephon_chaos.oracles.faults import COMPLETED, FAILED, FINDING
from zephon_chaos.scenario_rules import (
    PROCESS_ENDING_ACTIONS,
    STALLING_TOXICS,
)
from zephon_chaos.strategies import (
    AGGREGATE_TIMEOUTS_S,
    AGGREGATION_CHOICES,
    AGGREGATION_ODDS,
    CODEC_ODDS,
    COMPRESSOR_CHOICES,
    DATA_KINDS,
    DEPLOYMENT_CHOICES,
    DOWNSTREAM_AGGREGATION_ODDS,
    DOWNSTREAM_MTP_ODDS,
    DOWNSTREAM_PACK_ODDS,
    DOWNSTREAM_RUNNER_ODDS,
    DOWNSTREAM_SHUFFLE_ODDS,
    EXHAUSTION_CHOICES,
    EXHAUSTION_ODDS,
    FOLLOWER_PHASES,
    HEALING_TOXICS,
    INPROC_RUNNER_ODDS,
    LAG_POLICIES,
    LAUNCH_CHOICES,
    LEADER_PHASES,
    LINK_HEALS,
    MAPPING_CHOICES,
    MTP_CHOICES,
    PACK_ODDS,
    PACKINGS,
    PERSIST_FORMATS,
    PREFETCH_CHOICES,
    PROCESS_FAULTS,
    RANK_FAULT_POINTS,
    RESTART_CHOICES,
    ROUND_FAULTS,
    RUNNER_CHOICES,
    SERIALIZER_CHOICES,
    SHUFFLE_ODDS,
    SHUFFLES,
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
from zephon_chaos.workload.spec import (
    AGREEING_RETRIES,
    AT_STEP,
    CHILD_TARGETS,
    RETRIES,
    ROUND_PHASES,
)


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
    # The worker settings' odds on threads, downstream and torchrun, in that order.
    runner_odds = (INPROC_RUNNER_ODDS, DOWNSTREAM_RUNNER_ODDS, TORCHRUN_RUNNER_ODDS)
    mtp_odds = ((1, *(0 for _ in MTP_CHOICES[1:])), DOWNSTREAM_MTP_ODDS, TORCHRUN_MTP_ODDS)
    for dim, choices, (threads_odds, downstream_odds, torchrun_odds) in (
        (Dim.RUNNER, RUNNER_CHOICES, runner_odds),
        (Dim.MTP, MTP_CHOICES, mtp_odds),
    ):
        odds = threads_odds if inproc else downstream_odds if downstream else torchrun_odds
        for choice, odd in zip(choices, odds, strict=True):
            add(cell(dim, choice), _no_odds(odd, inproc))
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
    for name, values in DEPLOYMENT_CHOICES.items():
        for value in values:
            add(cell(Dim.DEPLOYMENT, name, value))
    for kind in DATA_KINDS:
        for ex, odd in zip(EXHAUSTION_CHOICES, EXHAUSTION_ODDS, strict=True):
            add(cell(Dim.DATA, kind, ex), None if odd > 0 else Why.NO_ODDS)
    for stage in MAP_STAGES:
        add(cell(Dim.MAP_STAGE, stage))
    pack_odds = DOWNSTREAM_PACK_ODDS if downstream else PACK_ODDS
    shuffle_odds = DOWNSTREAM_SHUFFLE_ODDS if downstream else SHUFFLE_ODDS
    for dim, choices, stage_odds in (
        (Dim.PACKING, PACKINGS, pack_odds),
        (Dim.SHUFFLE, SHUFFLES, shuffle_odds),
    ):
        for choice, odd in zip(choices, stage_odds, strict=True):
            add(cell(dim, choice), None if odd > 0 else Why.NO_ODDS)
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
    for toxic in (t for t in STORE_TOXICS if t in HEALING_TOXICS):
        for point in ROUND_PHASES:
            for until in LINK_HEALS[1:]:
                add(cell(Dim.STORE_FAULT_HEAL, toxic, point, until), store)
    for outcome in HEAL_OUTCOMES:
        add(cell(Dim.STORE_FAULT_HEAL_OUTCOME, outcome), store)
    out += _hosted_declared(inproc, faults, max_world, max_phases)
    for target in CHILD_TARGETS:
        for when in CHILD_WHEN:
            add(
                cell(Dim.CHILD_FAULT, target, when),
                Why.THREADS_NO_CHILDREN if inproc else None,
                no_faults,
            )
    for sync in SYNC_CHOICES:
        free = sync != SYNC_CHOICES[0]
        add(
            cell(Dim.SYNC, sync),
            Why.THREADS_START_TOGETHER if inproc and free else None,
            Why.LAG_NEEDS_TWO if free and max_world < 2 else None,
        )
    for role in ROLES:
        for retry in LAG_POLICIES:
            add(
                cell(Dim.LAG, role, retry),
                Why.THREADS_START_TOGETHER if inproc else None,
                no_faults,
                Why.LAG_NEEDS_TWO if max_world < 2 else None,
            )
    for retry in LAG_POLICIES:
        add(
            cell(Dim.DRIFT, retry),
            Why.THREADS_START_TOGETHER if inproc else None,
            no_faults,
            Why.LAG_NEEDS_TWO if max_world < 2 else None,
            Why.DRIFT_DEADLOCKS if retry in AGREEING_RETRIES else None,
        )
    return Space(tier, max_world, max_phases, faults, store_faults, tuple(out))


def one_rank(max_world: int) -> Why | None:
    return Why.ONE_RANK if max_world < 2 else None


def _tp_reason(tp: int, max_world: int) -> Why | None:
    return Why.TP_ABOVE_WORLD if tp > max_world else None


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
