"""The harness-hosted store's faults, and torchrun's restarts: their rules, both views.

One launch may carry one hosted-store fault (``Launch.store_faults``): aggregation
``store_explicit`` (the store the harness hosts and the launches share), timed by a round
point where a link fault could be (``no_round``), at round n at most the checkpoint count,
beside no rank or link fault and no retry; ``sigstop`` stalls it 0 < ``stall_s`` <=
``MAX_STALL_S``. ``max_restarts`` > 0 (torchrun restarts the workers) needs rank faults, at
a step or a round point, that fire from attempt 0 in ``attempts`` attempts at most
``max_restarts`` (``restart: 0``; the attempt after them runs through), no agent kill or
stop, one host, and a checkpoint if another launch follows (the last attempt hands on its
last). Ranks may run free, and a crash inside a round is in the space: what a restarted
attempt meets of the dead one's round is judged (``explore.known.dead_round``), not refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING

from zephon_chaos.workload.spec import (
    ROUND_PHASES,
    CheckpointAt,
)

if TYPE_CHECKING:
    from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules.predicates import (
    NoRound,
    Rule,
    RuleBreach,
    no_round,
    refusal,
    round_point,
)

STORE_ACTIONS: tuple[str, ...] = ("restart", "kill", "sigstop")
"""Hosted-store faults, simplest first: an empty store at once, a store gone, a stalled one."""


HOSTED_AGGREGATION = "store_explicit"


MAX_STALL_S = 30.0


RESTART_ACTIONS = ("raise", "exit", "sigkill", "sigterm")
"""Rank faults that end attempt 0 for torchrun to restart (an agent kill ends the launch)."""


class NoHostedStore(Enum):
    """Why a launch cannot carry a hosted-store fault, beyond ``NoRound``'s reasons."""

    NOT_HOSTED = "aggregation is not 'store_explicit', so the harness hosts no store to fault"


STORE_FAULT_RULES: dict[NoRound | NoHostedStore, Rule] = {
    NoHostedStore.NOT_HOSTED: Rule.STORE_FAULT_NOT_HOSTED,
    NoRound.ONE_RANK: Rule.STORE_FAULT_ONE_RANK,
    NoRound.MTP_MODE: Rule.STORE_FAULT_MTP_MODE,
    NoRound.NO_CHECKPOINT: Rule.STORE_FAULT_NO_CHECKPOINT,
    NoRound.RESTORED_STEP_ZERO: Rule.STORE_FAULT_RESTORED_STEP_ZERO,
}
"""The refusal of a hosted-store fault, by why no round can time it (``no_store_fault`` never
answers ``NoRound.NOT_STORE``: ``store_explicit`` is a store)."""


def no_store_fault(s: Scenario, i: int) -> NoRound | NoHostedStore | None:
    """Why launch ``i`` cannot carry a hosted-store fault (None: it can)."""
    if s.pipeline.aggregation != HOSTED_AGGREGATION:
        return NoHostedStore.NOT_HOSTED
    why = no_round(s, i)
    return None if why is NoRound.NOT_STORE else why


def store_fault_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    """The hosted-store fault and restart rules of launch ``i``."""

    ph, where = s.launches[i], f"launches[{i}]"
    if refusal(s, i) is not None:
        if ph.store_faults:
            yield RuleBreach(
                f"{where}.store_faults",
                "a refused launch runs nothing, so has none",
                Rule.STORE_FAULT_REFUSED_LAUNCH,
            )
        if ph.max_restarts:
            yield RuleBreach(
                f"{where}.max_restarts",
                "a refused launch has nothing to restart",
                Rule.RESTARTS_REFUSED_LAUNCH,
            )
        return
    if ph.store_faults:
        blocked = no_store_fault(s, i)
        if blocked is not None:
            yield RuleBreach(
                f"{where}.store_faults",
                f"no round can time a store fault: {blocked.value}",
                STORE_FAULT_RULES[blocked],
            )
        if len(ph.store_faults) > 1:
            yield RuleBreach(
                f"{where}.store_faults", "at most one store fault a launch", Rule.ONE_STORE_FAULT
            )
        if ph.rank_faults or ph.proxy_faults or ph.max_restarts:
            yield RuleBreach(
                f"{where}.store_faults",
                "a launch with a store fault has no rank or link fault and no restarts "
                "(neither verdict would be clear)",
                Rule.STORE_FAULT_ALONE,
            )
    for j, f in enumerate(ph.store_faults):
        at = f"{where}.store_faults[{j}]"
        if f.action not in STORE_ACTIONS:
            yield RuleBreach(
                f"{at}.action", f"must be one of {STORE_ACTIONS}", Rule.STORE_ACTION_KNOWN
            )
        point = round_point(f.at)
        if point is None or point[0] == "start":
            yield RuleBreach(
                f"{at}.at",
                f"{f.at!r} is not a round point ({', '.join(ROUND_PHASES)}) with an "
                "optional '#n' (n >= 1)",
                Rule.STORE_FAULT_POINT,
            )
        elif point[1] > len(ph.checkpoints):
            yield RuleBreach(
                f"{at}.at",
                f"round {point[1]} of {point[0]!r}, but the launch takes "
                f"{len(ph.checkpoints)} checkpoint(s)",
                Rule.STORE_FAULT_ROUND_COUNT,
            )
        if not 0 < f.stall_s <= MAX_STALL_S:
            yield RuleBreach(
                f"{at}.stall_s", f"must lie in (0, {MAX_STALL_S}] seconds", Rule.STALL_BOUND
            )
    yield from _restart_violations(s, i)


def _restart_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    ph, where = s.launches[i], f"launches[{i}]"
    if ph.max_restarts < 0:
        yield RuleBreach(f"{where}.max_restarts", "must be 0 or more", Rule.RESTARTS_NONNEGATIVE)
    if ph.max_restarts <= 0:
        return
    if not ph.rank_faults:
        yield RuleBreach(
            f"{where}.max_restarts",
            "restarts need a rank fault (restart: 0) that ends attempt 0; add one or use 0",
            Rule.RESTARTS_NEED_RANK_FAULT,
        )
    for j, f in enumerate(ph.rank_faults):
        if f.restart != 0:
            yield RuleBreach(
                f"{where}.rank_faults[{j}].restart",
                "must be 0 under max_restarts: a fault in every attempt uses up the restarts",
                Rule.RESTART_FAULT_ATTEMPT_ZERO,
            )
        elif not 1 <= f.attempts <= ph.max_restarts:
            yield RuleBreach(
                f"{where}.rank_faults[{j}].attempts",
                f"must lie in 1..max_restarts ({ph.max_restarts}): a fault in every attempt "
                "uses up the restarts",
                Rule.RESTART_FAULT_ATTEMPT_ZERO,
            )
        if f.action not in RESTART_ACTIONS:
            yield RuleBreach(
                f"{where}.rank_faults[{j}].action",
                f"under max_restarts one of {RESTART_ACTIONS} (torchrun restarts ended workers)",
                Rule.RESTART_ACTIONS,
            )
    if ph.hosts != 1:
        yield RuleBreach(
            f"{where}.max_restarts", "restarts are checked on one host", Rule.RESTARTS_ONE_HOST
        )
    if i < len(s.launches) - 1 and ph.restore_point is None:
        yield RuleBreach(
            f"{where}.checkpoints",
            "a restarted launch followed by another must checkpoint (attempt 1 hands it on)",
            Rule.RESTARTED_LAUNCH_CHECKPOINTS,
        )


def normalised_store_faults(s: Scenario, i: int, ph: Launch) -> Launch:
    """Launch ``i`` (``ph``: already normalised by the other rules) with its hosted-store
    fault and restarts made to obey the rules above."""
    if refusal(s, i) is not None or ph.expect_failure:
        return replace(ph, store_faults=(), max_restarts=0)
    here = s.with_(launches=(*s.launches[:i], ph, *s.launches[i + 1 :]))
    restarts = max(0, ph.max_restarts) if ph.rank_faults and ph.hosts == 1 else 0
    if restarts:
        faults = tuple(
            replace(f, restart=0, attempts=min(max(f.attempts, 1), restarts))
            for f in ph.rank_faults
            if f.action in RESTART_ACTIONS
        )
        restarts = restarts if faults else 0
        ph = replace(ph, rank_faults=faults or ph.rank_faults, max_restarts=restarts)
        if restarts:
            ph = replace(ph, lags=())
        if faults and i < len(s.launches) - 1 and not ph.checkpoints:
            ph = replace(ph, checkpoints=(CheckpointAt(ph.steps),))
    else:
        ph = replace(ph, max_restarts=0)
    kept = []
    for f in ph.store_faults[:1]:
        point = round_point(f.at)
        at = ROUND_PHASES[0] if point is None or point[0] == "start" else f.at
        n = (round_point(at) or ("", 1))[1]
        if n <= len(ph.checkpoints):
            kept.append(replace(f, at=at, stall_s=min(max(f.stall_s, 0.1), MAX_STALL_S)))
    if ph.rank_faults or ph.proxy_faults or ph.max_restarts or no_store_fault(here, i):
        kept = []
    return replace(ph, store_faults=tuple(kept))
