"""The rules' predicates and constants, written once: the checking view (``checking``)
and the repairing view (``repairing``) both ask them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from enum import Enum
from typing import TYPE_CHECKING

from zephon_chaos.faults.dir_interposer import NoFileCounterpart, absent_on_dir
from zephon_chaos.lanes import lanes_of
from zephon_chaos.scenario_rules.ids import Rule
from zephon_chaos.workload.spec import (
    ROUND_PHASES,
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    RankLag,
)

if TYPE_CHECKING:
    from zephon_chaos.scenario import Launch, Scenario


# The package re-exports all of these (``from .predicates import *``).
__all__ = [
    "CHANGED_C_ERROR",
    "DIR_AGGREGATION",
    "FOLLOWER_POINTS",
    "HEALING_TOXICS",
    "LEADER_POINTS",
    "POINT_AGGREGATIONS",
    "PROCESS_ENDING_ACTIONS",
    "RANK_POINT_ACTIONS",
    "REFUSAL_ERROR",
    "ROUND_ONLY_ACTIONS",
    "RUN_DRY_STEPS",
    "STALLING_TOXICS",
    "STORE_AGGREGATIONS",
    "STREAMS",
    "NoRound",
    "Refusal",
    "Rule",
    "RuleBreach",
    "cannot_run_dry",
    "clash",
    "collective",
    "is_finite",
    "lag_fits",
    "laid_out_tp",
    "lanes_per_rank",
    "missing_point",
    "no_point_round",
    "no_round",
    "rank_point",
    "refusal",
    "restored_c",
    "retried",
    "round_point",
    "writes_point",
]

REFUSAL_ERROR = "must be >= dp_degree"
"""What Zephon says when a launch has more ranks than canonical lanes (G > C)."""


CHANGED_C_ERROR = "canonical_replicas changed"
"""What Zephon says when a launch restores a checkpoint taken with another C."""


RUN_DRY_STEPS = 10_000
"""Steps of a last launch over finite data: more than any generated dataset holds."""
CHILD_TAIL_ROWS = 4096
"""Rows a rank draws after a mid-launch child fault: several times what the pipeline's
buffers hold (``runner: process``, 2 workers; one process alone, the first batch that waited
for a replacement came after 765 batches of 1 row, 253 of 2 and 189 of 4; a torchrun rank of
two drew 256 batches of 4 rows with none), so that the rank needs the workers Zephon starts
in place of the killed ones. A launch that never needed one is a harness problem
(``runner.checks.child_fault_gaps``), never a silent pass."""


LEADER_POINTS = ("announce", "outcome")
"""Round points only the leader (global rank 0) writes."""


FOLLOWER_POINTS = ("ack",)
"""Round points only followers write."""


STREAMS = ("upstream", "downstream")


STORE_AGGREGATIONS = ("store", "store_explicit")
"""Aggregation modes whose rounds go through a store the ranks' clients reach (link faults,
the interposer): torchrun's (``torch://``) or the harness-hosted one (``torch://host:port``)."""


DIR_AGGREGATION = "dir"


POINT_AGGREGATIONS = (*STORE_AGGREGATIONS, DIR_AGGREGATION)
"""Aggregation modes whose rounds a rank's interposer times a round-point rank fault in: the
store's keys (``faults.interposer``) or ``aggregate_dir``'s files (``faults.dir_interposer``)."""


RANK_POINT_ACTIONS = ("raise", "exit", "sigkill", "sigterm", "sigstop")
"""Rank faults a round point can time, simplest first; ``sigstop`` is followed by the
harness's SIGCONT (``nemeses.round_faults``)."""


ROUND_ONLY_ACTIONS = ("sigstop",)


HEALING_TOXICS = ("down", "reset_peer")
"""Link faults that may end with their round (``ProxyFault.until``): a link that is gone, a
connection reset. Each fails the rank's next store operation that awaits a reply, and Zephon's
client discards itself, so the next checkpoint reconnects (``_internal/kvstore.py``,
``TorchKVStore``): a transient fault with a promise after it (where the call's last write
awaited no reply, one call later: ``oracles.healing.promised_call``). A slow link fails
nothing to recover from, and a stalled one (``STALLING_TOXICS``) keeps its rank's call from
returning, so its round never ends."""


STALLING_TOXICS = ("timeout",)
"""Link faults that stall a link for good: data stops and no store call on it returns (a known
Zephon defect, ``explore.known``); only a launch's deadline ends a rank waiting on one."""


PROCESS_ENDING_ACTIONS = ("exit", "sigkill", "sigterm")
"""Rank faults that end their rank's process: its group ends with it, so no retry policy of
the launch is ever observed (normalising sets it to ``none``)."""
"""Rank faults a scenario times only by a round point: at a step nothing would continue it."""


class Refusal(Enum):
    """Why Zephon refuses a launch; the value is the fragment its error contains."""

    MORE_RANKS_THAN_LANES = REFUSAL_ERROR
    CHANGED_C = CHANGED_C_ERROR


class NoRound(Enum):
    """Why no checkpoint round of a launch can time a link fault or a round-point rank fault.

    ``runner: process`` is no reason: its worker processes run stage ops only, and the round
    runs in the rank process through the rank's own store client (Zephon 0.2.0
    ``Engine.__getstate__`` refuses to be pickled to a worker; ``Engine.state_dict`` runs the
    round; ``scripts/round_writer_probe.py process``). ``mtp_mode`` is one: the round runs in
    the MTP child."""

    ONE_RANK = "one rank never contacts the store"
    NOT_STORE = "aggregation 'dir' has no store, so no rank's store traffic to time or fault"
    MTP_MODE = "the MTP child writes the round, not the rank whose link is faulted"
    NO_CHECKPOINT = "the launch takes no checkpoint, so it runs no round"
    RESTORED_STEP_ZERO = (
        "a restored launch that checkpoints before its first batch runs no round "
        "(a known Zephon defect)"
    )

    @property
    def about_checkpoints(self) -> bool:
        """Curable by the launch's checkpoints, not its world or pipeline."""
        return self in (NoRound.NO_CHECKPOINT, NoRound.RESTORED_STEP_ZERO)

    @property
    def rank_point_rule(self) -> Rule:
        """The refusal of a round-point rank fault for this reason (``NOT_STORE`` blocks one
        only for an aggregation no scenario may name: every known one has round points)."""
        return _RANK_POINT_RULES[self]

    @property
    def link_fault_rule(self) -> Rule:
        """The refusal of a link fault for this reason."""
        return _LINK_FAULT_RULES[self]


_RANK_POINT_RULES = {
    NoRound.ONE_RANK: Rule.RANK_POINT_ONE_RANK,
    NoRound.NOT_STORE: Rule.AGGREGATION_KNOWN,
    NoRound.MTP_MODE: Rule.RANK_POINT_MTP_MODE,
    NoRound.NO_CHECKPOINT: Rule.RANK_POINT_NO_CHECKPOINT,
    NoRound.RESTORED_STEP_ZERO: Rule.RANK_POINT_RESTORED_STEP_ZERO,
}
_LINK_FAULT_RULES = {
    NoRound.ONE_RANK: Rule.LINK_FAULT_ONE_RANK,
    NoRound.NOT_STORE: Rule.LINK_FAULT_NOT_STORE,
    NoRound.MTP_MODE: Rule.LINK_FAULT_MTP_MODE,
    NoRound.NO_CHECKPOINT: Rule.LINK_FAULT_NO_CHECKPOINT,
    NoRound.RESTORED_STEP_ZERO: Rule.LINK_FAULT_RESTORED_STEP_ZERO,
}


@dataclass(frozen=True)
class RuleBreach:
    """A rule a scenario breaks: the field (``launches[1].proxy_faults[0].rank``), why, and
    which refusal (``docs/space.md`` classes each)."""

    field: str
    text: str
    rule: Rule


def is_finite(data: DataSpec) -> bool:
    """Some source stops when it runs out (``exhausted: stop``)."""
    return any(src.exhausted == "stop" for src in data.sources)


def own_workers(pipeline: PipelineSpec) -> bool:
    """Each rank's pipeline workers are its own children, for a child fault to kill: runner
    ``process`` without ``mtp_mode`` (under which they are the MTP child's)."""
    return pipeline.runner == "process" and not pipeline.mtp_mode


def faulted_otherwise(ph: Launch) -> bool:
    """The launch carries a fault beside any child fault: a rank, link or hosted-store fault,
    or a lag."""
    return bool(ph.rank_faults or ph.proxy_faults or ph.store_faults or ph.lags)


def lanes_per_rank(
    world_size: int, canonical_replicas: int, mapping: str, tp: int = 1
) -> list[int]:
    return [
        max(1, len(lanes_of(r, world_size, canonical_replicas, mapping, tp)))
        for r in range(world_size)
    ]


def child_tail_steps(s: Scenario, i: int, rank: int) -> int:
    """Steps launch ``i`` draws after a mid-launch child fault on ``rank``, so that the rank
    draws ``CHILD_TAIL_ROWS`` rows (it draws one batch a lane each step)."""
    ph = s.launches[i]
    per = lanes_per_rank(ph.world_size, s.canonical_replicas(i), s.pipeline.mapping, ph.tp)
    lanes = per[rank] if 0 <= rank < len(per) else 1
    return -(-CHILD_TAIL_ROWS // (s.data.microbatch * lanes))


def laid_out_tp(world_size: int, tp: int, canonical_replicas: int) -> int:
    """The tensor-parallel degree a launch can take: ``tp`` lowered to a divisor of the world,
    and to 1 where the adapter would refuse C for its DP groups (a refusal keeps it)."""
    t = math.gcd(world_size, max(1, tp))
    dp = world_size // t
    return 1 if t > 1 and dp <= canonical_replicas and canonical_replicas % dp else t


def restored_c(s: Scenario, i: int) -> int | None:
    """C of the checkpoint launch ``i`` restores (the last one handed on before it), if any."""
    for j in range(i - 1, -1, -1):
        if s.restore_index(j) is not None:
            return s.canonical_replicas(j)
    return None


def refusal(s: Scenario, i: int) -> Refusal | None:
    """Why Zephon refuses launch ``i``, or None when it accepts it."""
    c = s.canonical_replicas(i)
    if s.launches[i].dp > c:  # Zephon counts DP groups against C, not ranks
        return Refusal.MORE_RANKS_THAN_LANES
    before = restored_c(s, i)
    if before is not None and before != c:
        return Refusal.CHANGED_C
    return None


def no_round(
    s: Scenario, i: int, aggregations: Sequence[str] = STORE_AGGREGATIONS
) -> NoRound | None:
    """Why launch ``i`` cannot carry a link fault (a round-point rank fault: ``aggregations``
    ``POINT_AGGREGATIONS``, see :func:`no_point_round`); world and pipeline reasons first."""
    ph, p = s.launches[i], s.pipeline
    if ph.world_size < 2:
        return NoRound.ONE_RANK
    if p.aggregation not in aggregations:
        return NoRound.NOT_STORE
    if p.mtp_mode:
        return NoRound.MTP_MODE
    if not ph.checkpoints:
        return NoRound.NO_CHECKPOINT
    restored = any(s.restore_index(j) is not None for j in range(i))
    if restored and CheckpointAt(0) in ph.checkpoints:
        return NoRound.RESTORED_STEP_ZERO
    return None


def no_point_round(s: Scenario, i: int) -> NoRound | None:
    """Why no round of launch ``i`` can time a round-point rank fault (None: one can)."""
    return no_round(s, i, POINT_AGGREGATIONS)


def missing_point(s: Scenario, point: str) -> NoFileCounterpart | None:
    """Why the scenario's aggregation writes no ``point`` (None: it does, on some rank)."""
    return absent_on_dir(point) if s.pipeline.aggregation == DIR_AGGREGATION else None


def round_point(at: str) -> tuple[str, int] | None:
    """``"start"`` → ("start", 0); ``"ack#2"`` → ("ack", 2); None when not a point."""
    point, _, n = at.partition("#")
    if point == "start" and not n:
        return point, 0
    if point not in ROUND_PHASES or (n and not (n.isdigit() and int(n) >= 1)):
        return None
    return point, int(n or 1)


def rank_point(f: RankFault) -> tuple[str, int] | None:
    """A round-point rank fault's (point, n); None for one at a step or a malformed ``at``."""
    point = round_point(f.at) if f.at_round else None
    return None if point is None or point[0] == "start" else point


def writes_point(point: str, rank: int) -> bool:
    """Whether ``rank`` writes round point ``point`` (so its interposer can time a fault)."""
    if point in LEADER_POINTS:
        return rank == 0
    if point in FOLLOWER_POINTS:
        return rank != 0
    return True


def cannot_run_dry(s: Scenario) -> bool:
    """Over finite data, too few steps in all for any finite source to run out.

    A necessary bound only (a step delivers C microbatches): hand-written scenarios may pick
    their own step count; generated ones take ``RUN_DRY_STEPS``.
    """
    finite = [src.rows() for src in s.data.sources if src.exhausted == "stop"]
    last = len(s.launches) - 1
    if not finite or s.launches[last].expect_failure:
        return False
    rows = s.reference_steps * s.canonical_replicas(last) * s.data.microbatch
    return rows < min(finite)


def collective(
    checkpoints: Sequence[CheckpointAt],
    world_size: int,
    canonical_replicas: int,
    mapping: str,
    tp: int = 1,
) -> tuple[CheckpointAt, ...]:
    """Checkpoints without those that fall on an earlier one's batch on some rank.

    Such a pair would make ranks checkpoint a different number of times; dropping rather
    than filtering keeps shrinking smooth.
    """
    kept: list[CheckpointAt] = []
    for c in sorted(set(checkpoints), key=astuple):
        if clash(kept, c, world_size, canonical_replicas, mapping, tp) is None:
            kept.append(c)
    return tuple(kept)


def clash(
    earlier: Sequence[CheckpointAt],
    c: CheckpointAt,
    world: int,
    lanes: int,
    mapping: str,
    tp: int = 1,
) -> tuple[int, int] | None:
    """(index in ``earlier``, rank) of a checkpoint ``c`` shares a batch with, if any."""
    for rank, per in enumerate(lanes_per_rank(world, lanes, mapping, tp)):
        marks = [e.step * per + min(e.extra, per) for e in earlier]
        mark = c.step * per + min(c.extra, per)
        if mark in marks:
            return marks.index(mark), rank
    return None


def retried(f: RankFault) -> bool:
    """Whether a launch's retry policy can act on the round ``f`` fails: it is timed by a
    round point and leaves its rank alive (``PROCESS_ENDING_ACTIONS`` end the group)."""
    return f.at_round and f.action not in PROCESS_ENDING_ACTIONS


def lag_fits(lag: RankLag, ph: Launch) -> bool:
    peer = lag.awaited()
    return (
        0 <= lag.rank < ph.world_size
        and 0 <= peer < ph.world_size
        and peer != lag.rank
        and lag.checkpoint >= 0
        and lag.by >= 0
        and lag.awaited_call < len(ph.checkpoints)
    )
