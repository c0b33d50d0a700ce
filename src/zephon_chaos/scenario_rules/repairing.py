"""The repairing view: a scenario with everything derivable made to obey the rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from zephon_chaos.workload.spec import (
    AGREEING_RETRIES,
    COLLECTIVE_FORMATS,
    NEVER,
    ROUND_PHASES,
    CheckpointAt,
    RankFault,
    RankLag,
)

if TYPE_CHECKING:
    from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.scenario_rules.hosted import normalised_store_faults
from zephon_chaos.scenario_rules.predicates import (
    FOLLOWER_POINTS,
    HEALING_TOXICS,
    LEADER_POINTS,
    RANK_POINT_ACTIONS,
    ROUND_ONLY_ACTIONS,
    RUN_DRY_STEPS,
    child_tail_steps,
    collective,
    faulted_otherwise,
    is_finite,
    lag_fits,
    laid_out_tp,
    missing_point,
    no_point_round,
    no_round,
    own_workers,
    rank_point,
    refusal,
    retried,
    round_point,
    writes_point,
)


def normalised(s: Scenario) -> Scenario:
    """``s`` with everything derivable made to obey the rules, launch by launch.

    What cannot be derived (a bad enum, a world of 0 ranks) is left for ``validate`` to name.
    """
    if not s.launches or any(ph.world_size < 1 or ph.steps < 0 or ph.tp < 1 for ph in s.launches):
        return s
    done: list[Launch] = []
    for i in range(len(s.launches)):
        here = s.with_(launches=(*done, *s.launches[i:]))
        launch = normalised_store_faults(here, i, _normalised_launch(here, i))
        done.append(_with_children(here, i, launch))
    return s.with_(launches=tuple(done))


def _with_children(s: Scenario, i: int, ph: Launch) -> Launch:
    """``ph`` with its child faults kept only where the rules allow them (worker processes,
    endless data, no other fault), each on a rank of the launch and a step that has a batch."""
    if (
        not ph.child_faults
        or ph.expect_failure
        or ph.steps < 1
        or not own_workers(s.pipeline)
        or is_finite(s.data)
        or faulted_otherwise(ph)
    ):
        return replace(ph, child_faults=())
    kept = tuple(
        replace(f, rank=f.rank % ph.world_size, at_step=min(max(1, f.at_step), ph.steps))
        for f in ph.child_faults[:1]
    )
    here = s.with_(launches=(*s.launches[:i], ph, *s.launches[i + 1 :]))
    steps = max(
        [ph.steps]
        + [f.at_step + child_tail_steps(here, i, f.rank) for f in kept if f.at_step < ph.steps]
    )
    # A checkpoint at the launch's end stays at its end: what the replacements delivered is
    # then kept and compared, also where a later launch resumes from it.
    end = CheckpointAt(ph.steps)
    cps = tuple(CheckpointAt(steps) if cp == end else cp for cp in ph.checkpoints)
    return replace(ph, child_faults=kept, sync="lockstep", steps=steps, checkpoints=cps)


def _normalised_launch(s: Scenario, i: int) -> Launch:
    """Launch ``i`` of ``s`` (launches before it already normalised) made to obey the rules."""
    ph = s.launches[i]
    tp = laid_out_tp(ph.world_size, ph.tp, s.canonical_replicas(i))
    if tp != ph.tp:
        ph = replace(ph, tp=tp)
        s = s.with_(launches=(*s.launches[:i], ph, *s.launches[i + 1 :]))
    why = refusal(s, i)
    if why is not None:
        error = ph.expect_error if ph.expect_failure and why.value in ph.expect_error else why.value
        return replace(
            ph,
            steps=1,
            checkpoints=(),
            rank_faults=(),
            proxy_faults=(),
            lags=(),
            retry="none",
            expect_failure=True,
            expect_error=error,
        )
    last, finite = i == len(s.launches) - 1, is_finite(s.data)
    rows = sum(src.rows() for src in s.data.sources)
    steps = max(ph.steps, RUN_DRY_STEPS, rows) if last and finite else ph.steps
    c, mapping = s.canonical_replicas(i), s.pipeline.mapping
    at_round = [f for f in ph.rank_faults if f.at_round]
    ph = replace(
        ph,
        expect_failure=False,
        expect_error="",
        steps=steps,
        checkpoints=collective(
            [cp for cp in ph.checkpoints if (cp.step, cp.extra) <= (steps, 0)],
            ph.world_size,
            c,
            mapping,
            ph.tp,
        ),
        rank_faults=()
        if finite
        else tuple(
            f
            for f in ph.rank_faults
            if not f.at_round
            and 0 <= f.rank < ph.world_size
            and f.at_step <= steps
            and f.action not in ROUND_ONLY_ACTIONS
        ),
        proxy_faults=tuple(_placed(f, ph.world_size) for f in ph.proxy_faults),
    )

    def here(p: Launch) -> Scenario:
        return s.with_(launches=(*s.launches[:i], p, *s.launches[i + 1 :]))

    blocked = no_round(here(ph), i)
    if ph.proxy_faults and (blocked is None or blocked.about_checkpoints):
        ph = replace(ph, rank_faults=())  # with a crash as well, neither verdict would be clear
    if not last and not ph.checkpoints and not ph.rank_faults:
        ph = replace(ph, checkpoints=(CheckpointAt(ph.steps),))
    rounds = len(ph.checkpoints)
    faults = tuple(f for f in ph.proxy_faults if (round_point(f.at) or ("", 0))[1] <= rounds)
    if no_round(here(ph), i) is not None:
        faults = ()
    ph = replace(ph, proxy_faults=faults)
    point_fault = None if faults or finite else _placed_rank_fault(here(ph), i, at_round)
    if point_fault is not None:
        ph = replace(ph, rank_faults=(point_fault,))
    ph = _synced(ph, s.persist_format)
    retries = faults or (point_fault is not None and retried(point_fault)) or ph.lags
    return replace(ph, retry=ph.retry if retries else "none")


def _placed_rank_fault(s: Scenario, i: int, faults: Sequence[RankFault]) -> RankFault | None:
    """The first round-point rank fault on a rank that writes its point, if a round can
    time it (else None: the launch keeps its step faults)."""
    ph = s.launches[i]
    if not faults or no_point_round(s, i) is not None:
        return None
    f = faults[0]
    point = rank_point(f)
    if point is None or point[1] > len(ph.checkpoints) or f.action not in RANK_POINT_ACTIONS:
        return None
    if missing_point(s, point[0]) is not None:
        return None
    return replace(f, rank=_writer(point[0], f.rank, ph.world_size), at_step=0)


def _synced(ph: Launch, persist_format: str) -> Launch:
    """``ph`` with its lag kept only where it obeys the rules, and the sync a lag needs: a
    drift shortened to the checkpoints there are, and none beside an agreeing policy."""
    drift_fits = [_drift_fitted(lag, ph) for lag in ph.lags[:1]]
    lags = [
        lag
        for lag in drift_fits
        if lag_fits(lag, ph) and not (ph.rank_faults or ph.proxy_faults) and ph.tp == 1
    ]
    if lags and ph.retry in AGREEING_RETRIES:
        lags = [replace(lag, by=0) for lag in lags]
    if lags and ph.retry == "independent" and persist_format in COLLECTIVE_FORMATS:
        ph = replace(ph, retry="none")
    if ph.world_size < 2:
        return replace(ph, sync="lockstep", lags=())
    return replace(ph, lags=tuple(lags), sync="free" if lags else ph.sync)


def _drift_fitted(lag: RankLag, ph: Launch) -> RankLag:
    """``lag`` drifting no further than the launch's last checkpoint."""
    room = len(ph.checkpoints) - 1 - lag.checkpoint
    return replace(lag, by=max(0, min(lag.by, room)))


def _placed(f: ProxyFault, world: int) -> ProxyFault:
    """``f`` on a rank that writes its point, and timed by a round when it must be; healing
    only where it may (``HEALING_TOXICS``, at a round point)."""
    point = round_point(f.at)
    if point is None:
        return f
    at = f.at
    if f.toxic == "reset_peer" and point[0] == "start":
        at = ROUND_PHASES[0]
    until = f.until
    if f.heals and (f.toxic not in HEALING_TOXICS or at == "start"):
        until = NEVER
    return replace(f, rank=_writer(at.partition("#")[0], f.rank, world), at=at, until=until)


def _writer(name: str, rank: int, world: int) -> int:
    """``rank`` if it writes round point ``name`` in a world of ``world``, else one that does."""
    if 0 <= rank < world and writes_point(name, rank):
        return rank
    if name in LEADER_POINTS:
        return 0
    if name in FOLLOWER_POINTS:
        return 1 + rank % max(1, world - 1)
    return rank % world
