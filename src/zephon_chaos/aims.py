"""Aiming a drawn launch at a fault cell the exploration has not reached yet.

A plain draw lands in one four-way fault cell (action, round point, aggregation, retry) about
one time in a few hundred, and Hypothesis's ``target()`` climbs toward rare cells without
ever enumerating them: a 15-minute run left most of those cells empty. An :class:`Aim` names
one cell; :func:`aimed` edits a drawn scenario so that one launch's fault lands in it,
changing only what the cell's rules require (the aggregation, a runner whose rank writes the
round, two ranks, a checkpoint to time by, data that never runs dry) and leaving every other
drawn choice as it was. The rules (``scenario_rules.normalised``) still have the last word:
an aim never makes a scenario the validity model refuses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Literal

from zephon_chaos.dimensions.settings import WORKER_PROCESS_COST, setting_of
from zephon_chaos.scenario import Launch, ProxyFault, Scenario, StoreFault
from zephon_chaos.scenario_rules import STALLING_TOXICS, laid_out_tp
from zephon_chaos.workload.spec import (
    AT_STEP,
    COLLECTIVE_FORMATS,
    NEVER,
    CheckpointAt,
    ChildFault,
    RankFault,
    RankLag,
    Retry,
)

Role = Literal["leader", "follower"]


class AimKind(enum.Enum):
    """Which of a launch's fault fields an aim sets."""

    RANK = "rank fault"
    LINK = "store link fault"
    HOSTED = "hosted store fault"
    LAG = "lag"
    RESTART = "torchrun restart"
    SETTING = "pipeline setting"
    LAYOUT = "DP x TP layout change"
    CHILD = "child processes killed"


CHILD_POINTS = ("mid", "last")
"""When a ``CHILD`` aim's kill fires: mid-launch (batches still to draw), or at the last step
(the launch's last checkpoints and the pipeline's close follow at once)."""
CHILD_RELAUNCH_STEPS = 4
"""Steps at most of the relaunch after a ``CHILD`` aim's launch (the strategies' most)."""
SETTING_LAUNCHES = 2
"""Launches an aimed setting keeps: every launch of a worker-process pipeline imports torch in
each worker, so its scenario runs minutes; two launches still resume once."""


STALL_COST = 6
"""A stalling link's cell (``timeout``): the stall holds the round up to its bounds (18 s a
cell)."""
HOSTED_COST = 3
"""A hosted store's fault: the store is restarted, killed or stopped (10 s a cell)."""
LAG_COST = 2
"""A lagging rank's cell (5.5 s a cell)."""


LAYOUT_PAIRS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "dp-only": ((1, 2), (2, 2)),
    "tp-only": ((1, 1), (1, 2)),
    "both": ((2, 1), (1, 2)),
}
"""What a ``LAYOUT`` aim's resume does to (DP groups, TP ranks), at the fewest ranks: DP
grows with TP 2 fixed (2 -> 4 ranks), TP grows with one DP group (1 -> 2), or both change (2
ranks each). A downstream trainer resumes onto another mesh this way; a plain draw gives two
tp > 1 launches whose DP differs rarely (none in an 8-minute downstream run)."""


@dataclass(frozen=True)
class Aim:
    """One fault cell to land in: ``action`` is a rank fault's action, a toxic, a hosted
    store's action, or a setting's field (unused for a lag); ``point`` a round point, ``start``
    or ``step``, or the setting's value (its cell's text);
    ``until``: when a link fault ends (``ProxyFault.until``), ``never`` but for a heal."""

    kind: AimKind
    action: str = ""
    point: str = ""
    aggregation: str = "store"
    retry: Retry = "none"
    role: Role | None = None
    until: str = NEVER

    @property
    def heals(self) -> bool:
        """A link fault removed at its round's end: what the heal oracle judges."""
        return self.kind is AimKind.LINK and self.until != NEVER

    @property
    def cost(self) -> int:
        """What landing this aim's cell costs, in units of a rank fault's (about 3 s of a
        torchrun launch): a drawn aim's odds go down by it (``strategies.aiming``), so that a
        few slow cells do not take an aimed round's whole time."""
        if self.kind is AimKind.SETTING:
            return setting_of(self.action).aim_cost
        if self.kind is AimKind.CHILD:
            return WORKER_PROCESS_COST
        if self.kind is AimKind.LINK and self.action in STALLING_TOXICS:
            return STALL_COST
        if self.kind is AimKind.HOSTED:
            return HOSTED_COST
        if self.kind is AimKind.LAG:
            return LAG_COST
        return 1

    @property
    def group(self) -> tuple[str, ...]:
        """The aims a search draws among as one (by their cells and cost,
        ``strategies.aiming.group_odds``), then among each group's cells: a fault kind and
        action."""
        if self.heals:
            return (self.kind.value, "heals")
        if self.kind in (AimKind.RANK, AimKind.LINK) and self.role is not None:
            return (self.kind.value, "role")
        if self.kind is AimKind.LAG:
            return (self.kind.value, self.role or "")
        return (self.kind.value, self.action)


@dataclass(frozen=True)
class Draws:
    """What an aimed launch takes from the draw beyond its aim (so that it shrinks)."""

    rank: int = 0
    latency_ms: int = 10
    stall_s: float = 1.0


REPLACEMENT_FORMAT = "pickle"
"""Persistence of an aimed scenario drawn with a collective format (``dcp``): its save is a
collective over a process group that a split round outcome would block."""


def aimed(scenario: Scenario, i: int, aim: Aim, draws: Draws) -> Scenario:
    """``scenario`` with launch ``i`` carrying ``aim``'s fault, and the scenario-wide choices
    the fault needs; not normalised (the caller normalises and validates). A ``SETTING`` aim
    sets its setting (``dimensions.settings``) only, and keeps the first ``SETTING_LAUNCHES``
    launches."""
    p = scenario.pipeline
    if aim.kind is AimKind.SETTING:
        setting = setting_of(aim.action)
        s = setting.put(scenario, setting.value_of(aim.point))
        return s.with_(launches=s.launches[:SETTING_LAUNCHES])
    if aim.kind is AimKind.LAYOUT:
        return _relaid(scenario, aim.action, draws)
    if aim.kind is AimKind.CHILD:
        return _child_aimed(scenario, aim, draws)
    pipeline = replace(
        p,
        aggregation=aim.aggregation,
        runner="inline" if p.runner == "process" else p.runner,
        mtp_mode=False,
    )
    if aim.kind is AimKind.LAG and p.canonical_replicas < 2:
        # A lag needs two DP groups of one rank each (rule lag-tp-peers): C 2 at least.
        pipeline = replace(pipeline, canonical_replicas=2)
    data = scenario.data
    if aim.kind in (AimKind.RANK, AimKind.RESTART):
        # Finite data drops rank faults: the last launch's length is the data's.
        data = replace(
            data, sources=tuple(replace(src, exhausted="repeat") for src in data.sources)
        )
    fmt = scenario.persist_format
    if fmt in COLLECTIVE_FORMATS:
        fmt = REPLACEMENT_FORMAT
    s = scenario.with_(pipeline=pipeline, data=data, persist_format=fmt)
    phase = _aimed_launch(s, i, aim, draws)
    return s.with_(launches=(*s.launches[:i], phase, *s.launches[i + 1 :]))


def _aimed_launch(s: Scenario, i: int, aim: Aim, draws: Draws) -> Launch:
    ph = _accepted(s.launches[i], s.canonical_replicas(i))
    steps = max(1, ph.steps)
    checkpoints = tuple(cp for cp in ph.checkpoints if i == 0 or cp.step > 0)
    if not checkpoints:
        checkpoints = (CheckpointAt(steps),)
    rank = _rank(aim.role, draws.rank, ph.world_size)
    cleared = replace(
        ph.unfaulted(),
        steps=steps,
        checkpoints=checkpoints,
        max_restarts=ph.max_restarts,  # as drawn: normalising keeps it beside a rank fault
        retry=aim.retry,
        expect_failure=False,
        expect_error="",
    )
    if aim.kind is AimKind.RANK:
        at_step = aim.point == AT_STEP
        fault = RankFault(
            rank=rank,
            at_step=min(draws.rank, steps) if at_step else 0,
            action=aim.action,
            at=aim.point,
        )
        return replace(cleared, rank_faults=(fault,))
    if aim.kind is AimKind.RESTART:
        # Attempt 0 ends at a step; torchrun restarts the workers from the last checkpoint.
        fault = RankFault(rank=rank, at_step=min(draws.rank, steps), action=aim.action, restart=0)
        return replace(cleared, rank_faults=(fault,), max_restarts=1)
    if aim.kind is AimKind.LINK:
        attributes = link_attributes(aim.action, draws.latency_ms)
        link = ProxyFault(
            rank=rank, toxic=aim.action, attributes=attributes, at=aim.point, until=aim.until
        )
        return replace(cleared, proxy_faults=(link,))
    if aim.kind is AimKind.HOSTED:
        stall = draws.stall_s if aim.action == "sigstop" else 1.0
        return replace(cleared, store_faults=(StoreFault(aim.action, aim.point, stall),))
    if cleared.tp > 1:  # TP peers never lag (rule lag-tp-peers): DP groups of one rank
        world = min(max(2, cleared.world_size // cleared.tp), s.canonical_replicas(i))
        cleared = replace(cleared, world_size=world, tp=1)
        rank = min(rank, world - 1)
    return replace(cleared, sync="free", lags=(RankLag(rank, checkpoint=0),))


def _child_aimed(s: Scenario, aim: Aim, draws: Draws) -> Scenario:
    """Worker processes (``runner: process``) over endless data, and the first launch's rank
    ``draws.rank`` killing them mid-launch or at its last step, with no other fault."""
    pipeline = replace(s.pipeline, runner="process", mtp_mode=False)
    data = replace(
        s.data, sources=tuple(replace(src, exhausted="repeat") for src in s.data.sources)
    )
    ph = _accepted(s.launches[0], s.pipeline.canonical_replicas)
    last = aim.point == CHILD_POINTS[1]
    steps = max(1 if last else 2, ph.steps)
    at_step = steps if last else 1 + draws.rank % (steps - 1)
    fault = ChildFault(rank=draws.rank % ph.world_size, at_step=at_step, target=aim.action)
    first = replace(ph.unfaulted(), steps=steps, sync="lockstep", child_faults=(fault,))
    # A relaunch over endless data runs as long as it was drawn (over finite data: until the
    # data ran out, 10,000 steps): the steps of a plain draw keep it short.
    later = tuple(replace(p, steps=min(p.steps, CHILD_RELAUNCH_STEPS)) for p in s.launches[1:])
    phases = (first, *later[: SETTING_LAUNCHES - 1])
    return s.with_(pipeline=pipeline, data=data, launches=phases)


def _relaid(s: Scenario, change: str, draws: Draws) -> Scenario:
    """``s``'s first two launches laid out as ``LAYOUT_PAIRS[change]`` (the other way round
    for an odd drawn rank), the first checkpointing for the second to restore, and C even so
    that two DP groups divide it; the other drawn choices of both launches kept."""
    pair = LAYOUT_PAIRS[change]
    before, after = reversed(pair) if draws.rank % 2 else pair
    c = s.pipeline.canonical_replicas
    pipeline = replace(s.pipeline, canonical_replicas=c if c % 2 == 0 else 2 * c)
    first, second = s.launches[0], s.launches[1] if len(s.launches) > 1 else s.launches[0]
    steps = max(1, first.steps)
    launches = (
        replace(first, steps=steps, checkpoints=first.checkpoints or (CheckpointAt(steps),)),
        replace(second, max_restarts=0),
    )
    laid = tuple(
        replace(
            ph,
            world_size=dp * tp,
            tp=tp,
            canonical_replicas=None,
            expect_failure=False,
            expect_error="",
            rank_faults=(),
            store_faults=(),
        )
        for ph, (dp, tp) in zip(launches, (before, after), strict=True)
    )
    return s.with_(pipeline=pipeline, launches=laid)


def link_attributes(toxic: str, latency_ms: int) -> dict[str, int]:
    """A link toxic's attributes as the strategies draw them: a latency in ms; a reset at
    once (``reset_peer``) or a stall for good (``timeout``); none for a cut (``down``)."""
    if toxic == "latency":
        return {"latency": latency_ms}
    return {"timeout": 0} if toxic in ("reset_peer", "timeout") else {}


def _accepted(ph: Launch, c: int) -> Launch:
    """``ph`` with two ranks or more and no more DP groups than C (Zephon accepts it)."""
    world = max(2, ph.world_size)
    tp = laid_out_tp(world, ph.tp, c)
    if world // tp <= c:
        return replace(ph, world_size=world, tp=tp)
    if c >= 2:
        return replace(ph, world_size=min(world, c), tp=1)
    return replace(ph, world_size=2, tp=2)  # C = 1: one DP group of two ranks


def _rank(role: Role | None, drawn: int, world: int) -> int:
    if role == "leader":
        return 0
    if role == "follower":
        return 1 + drawn % max(1, world - 1)
    return drawn % world
