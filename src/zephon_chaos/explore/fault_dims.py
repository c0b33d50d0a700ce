"""The dimensions of a launch's faults and arrival: rank faults (at a step or a round point,
by role, their outcomes), store link faults (and their heals), the hosted store's faults,
torchrun's restarts, killed children, and how ranks arrive at a checkpoint (sync, lags)."""

from __future__ import annotations

from collections.abc import Iterator

from zephon_chaos.aims import CHILD_POINTS, Aim, AimKind
from zephon_chaos.dimensions.cells import (
    CHILD_WHEN,
    FAULT_OUTCOMES,
    HEAL_OUTCOMES,
    ROLES,
    ROUND_POINTS,
    START,
    Cell,
    Declared,
    Dim,
    Why,
    cell,
)
from zephon_chaos.dimensions.settings import Options
from zephon_chaos.explore.dimension import AimAt, Declare, Dimension, Land, Reason, first
from zephon_chaos.explore.layout_dims import accepted
from zephon_chaos.faults.dir_interposer import absent_on_dir
from zephon_chaos.nemeses.round_faults import RoundFaultLaunch
from zephon_chaos.oracles.faults import COMPLETED, FAILED, FINDING
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.scenario_rules import PROCESS_ENDING_ACTIONS, RESTART_ACTIONS, STALLING_TOXICS
from zephon_chaos.strategies import (
    AGGREGATION_CHOICES,
    FOLLOWER_PHASES,
    HEALING_TOXICS,
    HOSTED_STORE_ACTIONS,
    HOSTED_STORE_POINTS,
    LAG_POLICIES,
    LEADER_PHASES,
    LINK_HEALS,
    PROCESS_FAULTS,
    RANK_FAULT_POINTS,
    RESTART_CHOICES,
    ROUND_FAULTS,
    STORE_TOXICS,
    SYNC_CHOICES,
    THREAD_FAULTS,
)
from zephon_chaos.workload.spec import (
    AGREEING_RETRIES,
    AT_STEP,
    CHILD_TARGETS,
    RETRIES,
    ROUND_PHASES,
)

HEAL_RETRY = "lockstep"
"""A heal aim's retry policy: under ``none`` a failed call ends the rank, and no call follows
the heal for the heal oracle to judge."""


def _no_faults(o: Options) -> Why | None:
    return Why.FAULTS_OFF if not o.faults else None


def _one_rank(o: Options) -> Why | None:
    return Why.ONE_RANK if o.max_world < 2 else None


def _round_faults(o: Options) -> Why | None:
    return _no_faults(o) or _one_rank(o)


def _link_faults(o: Options) -> Why | None:
    return Why.STORE_FAULTS_OFF if not o.store_faults else _one_rank(o)


def _role_reason(point: str, role: str) -> Why | None:
    if point in LEADER_PHASES and role != "leader":
        return Why.LEADER_ONLY
    if point in FOLLOWER_PHASES and role != "follower":
        return Why.FOLLOWER_ONLY
    return None


def _role(rank: int) -> str:
    return ROLES[0] if rank == 0 else ROLES[1]


def _outcomes(dim: Dim, outcomes: tuple[str, ...], reason: Reason) -> Declare:
    def declare(o: Options) -> Iterator[Declared]:
        for outcome in outcomes:
            yield Declared(cell(dim, outcome), reason(o))

    return declare


# ---- rank faults ----------------------------------------------------------------------------
def _all_actions() -> tuple[str, ...]:
    return tuple(dict.fromkeys((*PROCESS_FAULTS, *ROUND_FAULTS, *THREAD_FAULTS)))


def _not_drawn(o: Options, action: str) -> Why | None:
    if action in (THREAD_FAULTS if o.inproc else ROUND_FAULTS):
        return None
    return Why.THREADS_NO_PROCESS_FAULT if o.inproc else Why.NO_ODDS


def _rank_faults(o: Options) -> Iterator[Declared]:
    for action in _all_actions():
        yield Declared(cell(Dim.RANK_FAULT, action), first(_no_faults(o), _not_drawn(o, action)))


def _rank_faults_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for f in ph.rank_faults:
            yield cell(Dim.RANK_FAULT, f.action)


def _rank_fault_points(o: Options) -> Iterator[Declared]:
    for action in _all_actions():
        for point in RANK_FAULT_POINTS:
            for agg in AGGREGATION_CHOICES:
                for retry in RETRIES:
                    at_step = point == AT_STEP
                    yield Declared(
                        cell(Dim.RANK_FAULT_POINT, action, point, agg, retry),
                        first(
                            _no_faults(o),
                            _not_drawn(o, action),
                            Why.STOP_AT_STEP if at_step and action not in PROCESS_FAULTS else None,
                            Why.RETRY_NEEDS_ROUND if at_step and retry != RETRIES[0] else None,
                            Why.ENDS_GROUP
                            if action in PROCESS_ENDING_ACTIONS and retry != RETRIES[0]
                            else None,
                            Why.DIR_NO_PARTICIPANTS
                            if agg == "dir" and not at_step and absent_on_dir(point) is not None
                            else None,
                            None if at_step else _one_rank(o),
                        ),
                    )


def _rank_fault_points_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for f in ph.rank_faults:
            point = f.at.partition("#")[0]
            yield cell(Dim.RANK_FAULT_POINT, f.action, point, s.pipeline.aggregation, ph.retry)


def _point_aim(kind: AimKind) -> AimAt:
    """The aim at a cell of (action or toxic, point, aggregation, retry)."""

    def aim(c: Cell) -> Aim:
        action, point, agg, retry = c.value
        return Aim(kind, action, point, agg, retry)  # type: ignore[arg-type]

    return aim


def _roles(dim: Dim, points: tuple[str, ...], reason: Reason) -> Declare:
    """Declares each of ``points`` on each role, where a rank of that role writes it."""

    def declare(o: Options) -> Iterator[Declared]:
        for point in points:
            for role in ROLES:
                yield Declared(cell(dim, point, role), first(reason(o), _role_reason(point, role)))

    return declare


def _rank_fault_roles_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for f in ph.rank_faults:
            if f.at_round:
                yield cell(Dim.RANK_FAULT_ROLE, f.at.partition("#")[0], _role(f.rank))


def _rank_fault_role_aim(c: Cell) -> Aim:
    point, role = c.value
    return Aim(AimKind.RANK, "raise", point, role=role)  # type: ignore[arg-type]


def _fault_outcomes_landed(dim: Dim, round_faults: bool) -> Land:
    """What the fault oracle said of each launch with a rank fault at a round point
    (``round_faults``) or a link fault; a hosted store's fault has a dimension of its own."""

    def land(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
        for run in outcome.phases if outcome is not None else ():
            if run.phase.store_faults or run.fault is None or run.fault.verdict is None:
                continue
            if isinstance(run.fault, RoundFaultLaunch) is round_faults:
                yield cell(dim, run.fault.verdict.outcome)

    return land


RANK_FAULTS: tuple[Dimension, ...] = (
    Dimension(Dim.RANK_FAULT, _rank_faults, _rank_faults_landed),
    Dimension(
        Dim.RANK_FAULT_POINT,
        _rank_fault_points,
        _rank_fault_points_landed,
        _point_aim(AimKind.RANK),
    ),
    Dimension(
        Dim.RANK_FAULT_ROLE,
        _roles(Dim.RANK_FAULT_ROLE, ROUND_PHASES, _round_faults),
        _rank_fault_roles_landed,
        _rank_fault_role_aim,
    ),
    Dimension(
        Dim.RANK_FAULT_OUTCOME,
        _outcomes(Dim.RANK_FAULT_OUTCOME, FAULT_OUTCOMES, _round_faults),
        _fault_outcomes_landed(Dim.RANK_FAULT_OUTCOME, round_faults=True),
    ),
)


# ---- store link faults ----------------------------------------------------------------------
def _store_faults(o: Options) -> Iterator[Declared]:
    for toxic in STORE_TOXICS:
        for point in ROUND_POINTS:
            for agg in AGGREGATION_CHOICES:
                for retry in RETRIES:
                    yield Declared(
                        cell(Dim.STORE_FAULT, toxic, point, agg, retry),
                        first(
                            _link_faults(o),
                            Why.THREAD_STALL if o.inproc and toxic in STALLING_TOXICS else None,
                            Why.DIR_NO_STORE if agg == "dir" else None,
                            Why.RESET_AT_START
                            if toxic == "reset_peer" and point == START
                            else None,
                        ),
                    )


def _store_faults_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for pf in ph.proxy_faults:
            point = pf.at.partition("#")[0]
            yield cell(Dim.STORE_FAULT, pf.toxic, point, s.pipeline.aggregation, ph.retry)


def _store_fault_roles_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for pf in ph.proxy_faults:
            yield cell(Dim.STORE_FAULT_ROLE, pf.at.partition("#")[0], _role(pf.rank))


def _store_fault_role_aim(c: Cell) -> Aim:
    point, role = c.value
    return Aim(AimKind.LINK, "latency", point, role=role)  # type: ignore[arg-type]


def _heals(o: Options) -> Iterator[Declared]:
    for toxic in (t for t in STORE_TOXICS if t in HEALING_TOXICS):
        for point in ROUND_PHASES:
            for until in LINK_HEALS[1:]:
                yield Declared(cell(Dim.STORE_FAULT_HEAL, toxic, point, until), _link_faults(o))


def _heals_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for pf in ph.proxy_faults:
            if pf.heals:
                yield cell(Dim.STORE_FAULT_HEAL, pf.toxic, pf.at.partition("#")[0], pf.until)


def _heal_aim(c: Cell) -> Aim:
    # The heal oracle judges the call after the fault's: a lockstep retry is that call.
    toxic, point, until = c.value
    return Aim(AimKind.LINK, toxic, point, retry=HEAL_RETRY, until=until)


def _heal_outcomes_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for run in outcome.phases if outcome is not None else ():
        healing = getattr(run.fault, "healing", None)  # a link-faulted launch's, if it heals
        if healing is not None:
            yield cell(Dim.STORE_FAULT_HEAL_OUTCOME, healing.outcome.value)


LINK_FAULTS: tuple[Dimension, ...] = (
    Dimension(Dim.STORE_FAULT, _store_faults, _store_faults_landed, _point_aim(AimKind.LINK)),
    Dimension(
        Dim.STORE_FAULT_ROLE,
        _roles(Dim.STORE_FAULT_ROLE, ROUND_POINTS, _link_faults),
        _store_fault_roles_landed,
        _store_fault_role_aim,
    ),
    Dimension(
        Dim.STORE_FAULT_OUTCOME,
        _outcomes(Dim.STORE_FAULT_OUTCOME, FAULT_OUTCOMES, _link_faults),
        _fault_outcomes_landed(Dim.STORE_FAULT_OUTCOME, round_faults=False),
    ),
    Dimension(Dim.STORE_FAULT_HEAL, _heals, _heals_landed, _heal_aim),
    Dimension(
        Dim.STORE_FAULT_HEAL_OUTCOME,
        _outcomes(Dim.STORE_FAULT_HEAL_OUTCOME, HEAL_OUTCOMES, _link_faults),
        _heal_outcomes_landed,
    ),
)


# ---- the harness-hosted store's faults, torchrun's restarts, killed children ----------------
def _hosted(o: Options) -> Why | None:
    return first(Why.HOSTED_STORE_INPROC if o.inproc else None, _no_faults(o), _one_rank(o))


def _hosted_faults(o: Options) -> Iterator[Declared]:
    for action in HOSTED_STORE_ACTIONS:
        for point in HOSTED_STORE_POINTS:
            yield Declared(cell(Dim.HOSTED_STORE_FAULT, action, point), _hosted(o))


def _hosted_faults_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for f in ph.store_faults:
            yield cell(Dim.HOSTED_STORE_FAULT, f.action, f.at.partition("#")[0])


def _hosted_fault_aim(c: Cell) -> Aim:
    action, point = c.value
    return Aim(AimKind.HOSTED, action, point, "store_explicit")


def _hosted_outcomes_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for run in outcome.phases if outcome is not None else ():
        if run.phase.store_faults and run.fault is not None and run.fault.verdict is not None:
            yield cell(Dim.HOSTED_STORE_OUTCOME, run.fault.verdict.outcome)


def _restarts(o: Options) -> Iterator[Declared]:
    agent = first(Why.THREADS_NO_AGENT if o.inproc else None, _no_faults(o))
    for n in RESTART_CHOICES:
        yield Declared(cell(Dim.RESTARTS, n), None if n == RESTART_CHOICES[0] else agent)


def _restarts_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        yield cell(Dim.RESTARTS, ph.max_restarts)


def _restart_aim(c: Cell) -> Aim | None:
    if c.value[0] == str(RESTART_CHOICES[0]):
        return None
    return Aim(AimKind.RESTART, RESTART_ACTIONS[1], AT_STEP)


def _children(o: Options) -> Iterator[Declared]:
    for target in CHILD_TARGETS:
        for when in CHILD_WHEN:
            yield Declared(
                cell(Dim.CHILD_FAULT, target, when),
                first(Why.THREADS_NO_CHILDREN if o.inproc else None, _no_faults(o)),
            )


def _children_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for child in ph.child_faults:
            yield cell(Dim.CHILD_FAULT, child.target, CHILD_WHEN[child.at_step >= ph.steps])


def _child_aim(c: Cell) -> Aim:
    target, when = c.value
    return Aim(AimKind.CHILD, target, CHILD_POINTS[when == CHILD_WHEN[1]])


HOSTED: tuple[Dimension, ...] = (
    Dimension(Dim.HOSTED_STORE_FAULT, _hosted_faults, _hosted_faults_landed, _hosted_fault_aim),
    Dimension(
        Dim.HOSTED_STORE_OUTCOME,
        _outcomes(Dim.HOSTED_STORE_OUTCOME, (COMPLETED, FAILED, FINDING), _hosted),
        _hosted_outcomes_landed,
    ),
    Dimension(Dim.RESTARTS, _restarts, _restarts_landed, _restart_aim),
    Dimension(Dim.CHILD_FAULT, _children, _children_landed, _child_aim),
)


# ---- how ranks arrive at a checkpoint -------------------------------------------------------
def _lag_needs_two(o: Options) -> Why | None:
    return Why.LAG_NEEDS_TWO if o.max_world < 2 else None


def _threads_together(o: Options) -> Why | None:
    return Why.THREADS_START_TOGETHER if o.inproc else None


def _syncs(o: Options) -> Iterator[Declared]:
    for sync in SYNC_CHOICES:
        free = sync != SYNC_CHOICES[0]
        yield Declared(
            cell(Dim.SYNC, sync),
            first(_threads_together(o) if free else None, _lag_needs_two(o) if free else None),
        )


def _syncs_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        yield cell(Dim.SYNC, ph.sync)


def _lags(o: Options) -> Iterator[Declared]:
    for role in ROLES:
        for retry in LAG_POLICIES:
            yield Declared(
                cell(Dim.LAG, role, retry),
                first(_threads_together(o), _no_faults(o), _lag_needs_two(o)),
            )


def _lags_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for lag in ph.lags:
            yield cell(Dim.LAG, _role(lag.rank), ph.retry)


def _lag_aim(c: Cell) -> Aim:
    role, retry = c.value
    return Aim(AimKind.LAG, retry=retry, role=role)  # type: ignore[arg-type]


def _drifts(o: Options) -> Iterator[Declared]:
    for retry in LAG_POLICIES:
        yield Declared(
            cell(Dim.DRIFT, retry),
            first(
                _threads_together(o),
                _no_faults(o),
                _lag_needs_two(o),
                Why.DRIFT_DEADLOCKS if retry in AGREEING_RETRIES else None,
            ),
        )


def _drifts_landed(s: Scenario, outcome: ScenarioOutcome | None) -> Iterator[Cell]:
    for _, ph in accepted(s):
        for lag in ph.lags:
            if lag.by:
                yield cell(Dim.DRIFT, ph.retry)


ARRIVAL: tuple[Dimension, ...] = (
    Dimension(Dim.SYNC, _syncs, _syncs_landed),
    Dimension(Dim.LAG, _lags, _lags_landed, _lag_aim),
    Dimension(Dim.DRIFT, _drifts, _drifts_landed),
)
