"""The one validity model of a scenario: what a launch may carry, given its place.

Two views of the same predicates: :func:`violations` lists what a scenario breaks (each a
:class:`Violation` naming the field; ``Scenario.validate`` raises the first), and
:func:`normalised` repairs what can be derived (a launch with more ranks than lanes is a
refusal, a link fault no round can time is dropped, ...). The strategies build every
scenario through ``normalised``, and the explorer's polishing normalises each candidate, so
generation, shrinking, polishing and loading a file all obey the rules written here once.

Rules, per launch ``i`` (C: its canonical_replicas):

* layout: ``world_size`` is ``dp`` data-parallel groups of ``tp`` ranks (``tp`` divides it);
  lanes belong to DP groups, so Zephon's rules below count groups, not ranks. With ``tp`` > 1
  (the downstream adapter's DP x TP layout) C is a multiple of ``dp``, as the adapter requires
  (``ZephonDataLoader._validate_config``); normalising lowers ``tp`` to a divisor of the
  world, and to 1 where C is not a multiple of the groups;
* refusal: ``expect_failure`` exactly when Zephon refuses the launch: more DP groups than C
  (``canonical_replicas ... must be >= dp_degree``, ``Engine._resolve_parallelism_params``), or a
  C other than that of the checkpoint it restores; such a launch takes no checkpoint,
  carries no fault and names the error it expects in ``expect_error`` (normalising: one
  step, and Zephon's own error);
* a launch followed by another checkpoints (the next restores from it), unless a rank fault
  ends it; checkpoints lie within its steps and are collective on every rank;
* rank faults name a rank of the launch and a step within it; none over finite data (a rank
  whose data ran out never reaches its fault), and none beside a link fault; a ``sigstop``
  only at a round point (the harness continues a rank it heard stop there);
* a rank fault at a round point (``RankFault.at``: ``shard``, ``ack#2``, ...) is the launch's
  only rank fault, one of ``RANK_POINT_ACTIONS``, where a round can time it (as a link
  fault below, but with ``aggregate_dir`` too: the rank's interposer wraps its round files,
  ``faults.dir_interposer``, which have no ``participants`` write), on a rank that writes its
  point, in round n at most the checkpoint count, and not beside ``dcp`` persistence (a
  split outcome would block its collective save);
* link faults (``proxy_faults``) only where a checkpoint round can time them: two or more
  ranks, aggregation through a store (``store`` or ``store_explicit``), a runner other than
  ``process``, no ``mtp_mode``, at least one checkpoint, and not a restored launch that
  checkpoints before its first batch; the leader-only points (announce, outcome) on rank 0,
  the follower-only one (ack) elsewhere; a ``reset_peer`` at a round point (at start it
  resets nothing); the n-th round at most the launch's checkpoint count; a retry policy only
  with a link fault or a round-point rank fault that leaves its rank alive (``raise``,
  ``sigstop``): an ``exit``, SIGKILL or SIGTERM ends its rank, and torchrun's agent ends the
  group within one monitor interval, long before any round could fail and be retried;
* over finite data the last launch can run dry (it would otherwise stop with lanes out of
  step, which the batch oracle cannot compare);
* ``sync: free`` only with two or more ranks (one rank is late for no one); a lag
  (``RankLag``: a rank that calls a checkpoint once a peer's call of it has ended) only under
  ``free``, at most one a launch, on two ranks of it and one of its checkpoints, beside no
  other fault and no ``independent`` retry; a retry policy (lockstep, independent, skip) only
  where a checkpoint can fail on purpose: a link fault, a round-point rank fault or a lag.
  On the in-process tier threads start together and never meet, so ``free`` means what
  ``lockstep`` means there; a lag needs a process group (``inproc.inproc_refusal``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import astuple, dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from zephon_chaos.faults.dir_interposer import NoFileCounterpart, absent_on_dir
from zephon_chaos.lanes import lanes_of
from zephon_chaos.workload.spec import (
    COLLECTIVE_FORMATS,
    ROUND_PHASES,
    CheckpointAt,
    DataSpec,
    RankFault,
    RankLag,
)

if TYPE_CHECKING:
    from zephon_chaos.scenario import Phase, ProxyFault, Scenario

REFUSAL_ERROR = "must be >= dp_degree"
"""What Zephon says when a launch has more ranks than canonical lanes (G > C)."""
CHANGED_C_ERROR = "canonical_replicas changed"
"""What Zephon says when a launch restores a checkpoint taken with another C."""
RUN_DRY_STEPS = 10_000
"""Steps of a last launch over finite data: more than any generated dataset holds."""
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
harness's SIGCONT (``faults.round_faults``)."""
ROUND_ONLY_ACTIONS = ("sigstop",)
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
    """Why no checkpoint round of a launch can time a link fault or a round-point rank fault."""

    ONE_RANK = "one rank never contacts the store"
    NOT_STORE = "aggregation 'dir' has no store, so no rank's store traffic to time or fault"
    PROCESS_RUNNER = "worker processes write the round, not the rank whose link is faulted"
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


@dataclass(frozen=True)
class Violation:
    """A rule a scenario breaks: the field (``phases[1].proxy_faults[0].rank``) and why."""

    field: str
    text: str


# ---- predicates: the rules, written once ----------------------------------------------


def is_finite(data: DataSpec) -> bool:
    """Some source stops when it runs out (``exhausted: stop``)."""
    return any(src.exhausted == "stop" for src in data.sources)


def lanes_per_rank(
    world_size: int, canonical_replicas: int, mapping: str, tp: int = 1
) -> list[int]:
    return [
        max(1, len(lanes_of(r, world_size, canonical_replicas, mapping, tp)))
        for r in range(world_size)
    ]


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
    if s.phases[i].dp > c:  # Zephon counts DP groups against C, not ranks
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
    ph, p = s.phases[i], s.pipeline
    if ph.world_size < 2:
        return NoRound.ONE_RANK
    if p.aggregation not in aggregations:
        return NoRound.NOT_STORE
    if p.runner == "process":
        return NoRound.PROCESS_RUNNER
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
    last = len(s.phases) - 1
    if not finite or s.phases[last].expect_failure:
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
        if _clash(kept, c, world_size, canonical_replicas, mapping, tp) is None:
            kept.append(c)
    return tuple(kept)


def _clash(
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


# ---- the checking view ----------------------------------------------------------------


def violations(s: Scenario) -> list[Violation]:
    """Every rule ``s`` breaks, launch by launch (structure is ``Scenario.validate``'s)."""
    out: list[Violation] = [v for i in range(len(s.phases)) for v in _layout_violations(s, i)]
    if out:  # the other rules count DP groups: they need whole ones
        return out
    for i in range(len(s.phases)):
        out += _launch_violations(s, i)
        out += store_fault_violations(s, i)
    last = len(s.phases) - 1
    if is_finite(s.data) and cannot_run_dry(s):
        out.append(
            Violation(
                f"phases[{last}].steps",
                f"{s.phases[last].steps} steps cannot run the finite data dry, so lanes would "
                f"stop out of step; give the last launch more steps (say {RUN_DRY_STEPS})",
            )
        )
    return out


def _launch_violations(s: Scenario, i: int) -> Iterator[Violation]:
    ph, where = s.phases[i], f"phases[{i}]"
    c = s.canonical_replicas(i)
    why = refusal(s, i)
    if why is not None:
        yield from _refused_violations(ph, where, why, c, restored_c(s, i))
        return
    if ph.expect_failure:
        yield Violation(
            f"{where}.expect_failure",
            f"Zephon accepts this launch ({ph.world_size} rank(s) <= C={c}, C unchanged), so "
            "it must not be expected to fail",
        )
    if ph.expect_error:
        yield Violation(f"{where}.expect_error", "only a launch expected to fail names an error")
    yield from _checkpoint_violations(s, i)
    yield from _rank_fault_violations(s, i)
    yield from _link_fault_violations(s, i)
    yield from _sync_violations(s, i)


def _layout_violations(s: Scenario, i: int) -> Iterator[Violation]:
    ph, where, c = s.phases[i], f"phases[{i}]", s.canonical_replicas(i)
    if ph.tp < 1 or ph.world_size % ph.tp:
        yield Violation(
            f"{where}.tp",
            f"{ph.tp} must divide world_size {ph.world_size} (DP groups of tp ranks each)",
        )
    elif ph.tp > 1 and ph.dp <= c and c % ph.dp:
        yield Violation(
            f"{where}.tp",
            f"with tp {ph.tp} the launch has {ph.dp} DP groups, and C={c} is not a multiple of "
            "them, which the downstream adapter refuses; use tp 1 or a C that they divide",
        )


def _refused_violations(
    ph: Phase, where: str, why: Refusal, c: int, before: int | None
) -> Iterator[Violation]:
    if not ph.expect_failure:
        if why is Refusal.MORE_RANKS_THAN_LANES:
            yield Violation(
                f"{where}.world_size",
                f"{ph.world_size} ranks exceed canonical_replicas={c}, which Zephon refuses; "
                f"set expect_failure and expect_error {REFUSAL_ERROR!r} to check the refusal",
            )
        else:
            yield Violation(
                f"{where}.canonical_replicas",
                f"C={c} differs from the C={before} of the checkpoint this launch restores, "
                f"which Zephon refuses; set expect_failure and expect_error {CHANGED_C_ERROR!r}",
            )
        return
    if not ph.expect_error:
        # Any text: it is a claim about Zephon's message, which the runner checks.
        yield Violation(
            f"{where}.expect_error",
            f"a refused launch names the error it expects (Zephon's is {why.value!r})",
        )
    for name in ("checkpoints", "rank_faults", "proxy_faults", "lags"):
        if getattr(ph, name):
            yield Violation(f"{where}.{name}", "a refused launch runs nothing, so has none")
    if ph.retry != "none":
        yield Violation(f"{where}.retry", "a refused launch takes no checkpoint to retry")


def _checkpoint_violations(s: Scenario, i: int) -> Iterator[Violation]:
    ph, where = s.phases[i], f"phases[{i}]"
    for j, cp in enumerate(ph.checkpoints):
        if not (cp.step >= 0 and cp.extra >= 0 and (cp.step, cp.extra) <= (ph.steps, 0)):
            yield Violation(
                f"{where}.checkpoints[{j}]", f"must lie within the launch's {ph.steps} steps"
            )
            return
    if i < len(s.phases) - 1 and not ph.rank_faults and ph.restore_point is None:
        yield Violation(
            f"{where}.checkpoints",
            "a launch followed by another must checkpoint (the next one restores from it)",
        )
    order = sorted(range(len(ph.checkpoints)), key=lambda j: astuple(ph.checkpoints[j]))
    for k, j in enumerate(order):
        earlier = [ph.checkpoints[e] for e in order[:k]]
        c, mapping = s.canonical_replicas(i), s.pipeline.mapping
        hit = _clash(earlier, ph.checkpoints[j], ph.world_size, c, mapping, ph.tp)
        if hit is not None:
            per = lanes_per_rank(ph.world_size, c, mapping, ph.tp)
            yield Violation(
                f"{where}.checkpoints[{j}]",
                f"falls on the same batch as checkpoints[{order[hit[0]]}] on rank {hit[1]} "
                f"({per[hit[1]]} lane(s) a step), so ranks would checkpoint a different number "
                "of times; drop one or move it",
            )
            return


def _rank_fault_violations(s: Scenario, i: int) -> Iterator[Violation]:
    ph, where = s.phases[i], f"phases[{i}]"
    if ph.rank_faults and is_finite(s.data):
        yield Violation(
            f"{where}.rank_faults",
            "over finite data a rank whose data ran out never reaches its fault; "
            "use endless sources (exhausted: repeat) or drop the fault",
        )
    if ph.rank_faults and ph.proxy_faults:
        yield Violation(
            f"{where}.rank_faults",
            "a launch with a link fault has no rank fault (neither verdict would be clear)",
        )
    if len(ph.rank_faults) > 1 and any(f.at_round for f in ph.rank_faults):
        yield Violation(
            f"{where}.rank_faults",
            "a launch with a round-point rank fault has no other (one fault, one verdict)",
        )
    for j, f in enumerate(ph.rank_faults):
        if not 0 <= f.rank < ph.world_size:
            yield Violation(
                f"{where}.rank_faults[{j}].rank",
                f"must name a rank of the launch's {ph.world_size}",
            )
        if f.at_round:
            yield from _rank_point_violations(s, i, f, f"{where}.rank_faults[{j}]")
            continue
        if not 0 <= f.at_step <= ph.steps:
            yield Violation(
                f"{where}.rank_faults[{j}].at_step",
                f"must lie within the launch's {ph.steps} steps",
            )
        if f.action in ROUND_ONLY_ACTIONS:
            yield Violation(
                f"{where}.rank_faults[{j}].at",
                f"a {f.action} at a step has nothing to continue it: time it by a round point "
                f"({', '.join(ROUND_PHASES)})",
            )


def _rank_point_violations(s: Scenario, i: int, f: RankFault, where: str) -> Iterator[Violation]:
    ph = s.phases[i]
    point = rank_point(f)
    if point is None:
        yield Violation(
            f"{where}.at",
            f"{f.at!r} is not 'step' or a round point ({', '.join(ROUND_PHASES)}) with an "
            "optional '#n' (n >= 1)",
        )
        return
    name, n = point
    if f.action not in RANK_POINT_ACTIONS:
        yield Violation(
            f"{where}.action",
            f"{f.action!r} is not a round-point fault; one of {', '.join(RANK_POINT_ACTIONS)}",
        )
    blocked, missing = no_point_round(s, i), missing_point(s, name)
    if blocked is not None:
        yield Violation(f"{where}.at", f"no round can time a rank fault: {blocked.value}")
    elif missing is not None:
        yield Violation(f"{where}.at", f"no rank writes {name!r}: {missing.value}")
    elif 0 <= f.rank < ph.world_size and not writes_point(name, f.rank):
        who = "the leader (rank 0)" if name in LEADER_POINTS else "followers (not rank 0)"
        yield Violation(f"{where}.rank", f"only {who} write(s) {name!r}: rank {f.rank} never does")
    if n > len(ph.checkpoints):
        yield Violation(
            f"{where}.at",
            f"round {n} of {name!r}, but the launch takes {len(ph.checkpoints)} checkpoint(s)",
        )
    if s.persist_format in COLLECTIVE_FORMATS:
        yield Violation(
            f"{where}.at",
            f"no round-point rank fault beside {s.persist_format!r} persistence: the ranks "
            "that got a split outcome's checkpoint would block in its collective save",
        )


def _link_fault_violations(s: Scenario, i: int) -> Iterator[Violation]:
    ph, where = s.phases[i], f"phases[{i}]"
    if not ph.proxy_faults:
        if ph.retry != "none" and not any(retried(f) for f in ph.rank_faults) and not ph.lags:
            yield Violation(
                f"{where}.retry",
                f"retry {ph.retry!r} needs a link fault, a round-point rank fault that leaves its "
                "rank alive (raise, sigstop) or a lag to fail a round; without one use 'none'",
            )
        return
    blocked = no_round(s, i)
    if blocked is not None:
        yield Violation(f"{where}.proxy_faults", f"no round can time a link fault: {blocked.value}")
    for j, f in enumerate(ph.proxy_faults):
        yield from _fault_violations(f, f"{where}.proxy_faults[{j}]", ph)


def _fault_violations(f: ProxyFault, where: str, ph: Phase) -> Iterator[Violation]:
    point = round_point(f.at)
    if point is None:
        yield Violation(
            f"{where}.at",
            f"{f.at!r} is not 'start' or a round point ({', '.join(ROUND_PHASES)}) with an "
            "optional '#n' (n >= 1)",
        )
        return
    name, n = point
    if not 0 <= f.rank < ph.world_size:
        yield Violation(f"{where}.rank", f"must name a rank of the launch's {ph.world_size}")
    elif not writes_point(name, f.rank):
        who = "the leader (rank 0)" if name in LEADER_POINTS else "followers (not rank 0)"
        yield Violation(f"{where}.rank", f"only {who} write(s) {name!r}: rank {f.rank} never does")
    if f.stream not in STREAMS:
        yield Violation(f"{where}.stream", f"must be one of {STREAMS}")
    if f.toxic == "reset_peer" and name == "start":
        yield Violation(f"{where}.at", "a reset_peer at start resets nothing: time it by a round")
    if n > len(ph.checkpoints):
        yield Violation(
            f"{where}.at",
            f"round {n} of {name!r}, but the launch takes {len(ph.checkpoints)} checkpoint(s)",
        )


# ---- the repairing view ---------------------------------------------------------------


def normalised(s: Scenario) -> Scenario:
    """``s`` with everything derivable made to obey the rules, launch by launch.

    What cannot be derived (a bad enum, a world of 0 ranks) is left for ``validate`` to name.
    """
    if not s.phases or any(ph.world_size < 1 or ph.steps < 0 or ph.tp < 1 for ph in s.phases):
        return s
    done: list[Phase] = []
    for i in range(len(s.phases)):
        here = s.with_(phases=(*done, *s.phases[i:]))
        done.append(normalised_store_faults(here, i, _normalised_launch(here, i)))
    return s.with_(phases=tuple(done))


def _normalised_launch(s: Scenario, i: int) -> Phase:
    """Launch ``i`` of ``s`` (launches before it already normalised) made to obey the rules."""
    ph = s.phases[i]
    tp = laid_out_tp(ph.world_size, ph.tp, s.canonical_replicas(i))
    if tp != ph.tp:
        ph = replace(ph, tp=tp)
        s = s.with_(phases=(*s.phases[:i], ph, *s.phases[i + 1 :]))
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
    last, finite = i == len(s.phases) - 1, is_finite(s.data)
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

    def here(p: Phase) -> Scenario:
        return s.with_(phases=(*s.phases[:i], p, *s.phases[i + 1 :]))

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
    ph = _synced(ph)
    retries = faults or (point_fault is not None and retried(point_fault)) or ph.lags
    return replace(ph, retry=ph.retry if retries else "none")


def retried(f: RankFault) -> bool:
    """Whether a launch's retry policy can act on the round ``f`` fails: it is timed by a
    round point and leaves its rank alive (``PROCESS_ENDING_ACTIONS`` end the group)."""
    return f.at_round and f.action not in PROCESS_ENDING_ACTIONS


def _placed_rank_fault(s: Scenario, i: int, faults: Sequence[RankFault]) -> RankFault | None:
    """The first round-point rank fault on a rank that writes its point, if a round can
    time it (else None: the launch keeps its step faults)."""
    ph = s.phases[i]
    if not faults or no_point_round(s, i) is not None or s.persist_format in COLLECTIVE_FORMATS:
        return None
    f = faults[0]
    point = rank_point(f)
    if point is None or point[1] > len(ph.checkpoints) or f.action not in RANK_POINT_ACTIONS:
        return None
    if missing_point(s, point[0]) is not None:
        return None
    return replace(f, rank=_writer(point[0], f.rank, ph.world_size), at_step=0)


def _synced(ph: Phase) -> Phase:
    """``ph`` with its lag kept only where it obeys the rules, and the sync a lag needs."""
    lags = [
        lag
        for lag in ph.lags[:1]
        if _lag_fits(lag, ph) and not (ph.rank_faults or ph.proxy_faults)
    ]
    if ph.retry == "independent":
        lags = []
    if ph.world_size < 2:
        return replace(ph, sync="lockstep", lags=())
    return replace(ph, lags=tuple(lags), sync="free" if lags else ph.sync)


def _lag_fits(lag: RankLag, ph: Phase) -> bool:
    peer = lag.awaited()
    return (
        0 <= lag.rank < ph.world_size
        and 0 <= peer < ph.world_size
        and peer != lag.rank
        and 0 <= lag.checkpoint < len(ph.checkpoints)
    )


def _sync_violations(s: Scenario, i: int) -> Iterator[Violation]:
    """``sync: free`` needs two ranks; a lag needs ``free``, a checkpoint, no other fault."""
    ph, where = s.phases[i], f"phases[{i}]"
    if ph.sync == "free" and ph.world_size < 2:
        yield Violation(
            f"{where}.sync",
            "one rank is never late for another: 'free' needs two or more ranks; use 'lockstep'",
        )
    if not ph.lags:
        return
    if ph.sync != "free":
        yield Violation(
            f"{where}.lags",
            "a lag needs sync 'free': lockstep ranks meet before each checkpoint, so the "
            "lagging rank and the one it waits for would wait for each other",
        )
    if len(ph.lags) > 1:
        yield Violation(f"{where}.lags", "at most one lag a launch (two could wait on each other)")
    if ph.rank_faults or ph.proxy_faults:
        yield Violation(
            f"{where}.lags", "a launch with a lag has no other fault (one cause, one verdict)"
        )
    if ph.retry == "independent":
        yield Violation(
            f"{where}.retry",
            "no 'independent' retry beside a lag: a rank's later attempts are rounds of its own "
            "and which one the late rank finds decides the outcome; use none, lockstep or skip",
        )
    for j, lag in enumerate(ph.lags):
        if not _lag_fits(lag, ph):
            yield Violation(
                f"{where}.lags[{j}]",
                f"must name two different ranks of the launch's {ph.world_size} and one of its "
                f"{len(ph.checkpoints)} checkpoint(s) (0-based)",
            )


def _placed(f: ProxyFault, world: int) -> ProxyFault:
    """``f`` on a rank that writes its point, and timed by a round when it must be."""
    point = round_point(f.at)
    if point is None:
        return f
    at = f.at
    if f.toxic == "reset_peer" and point[0] == "start":
        at = ROUND_PHASES[0]
    return replace(f, rank=_writer(at.partition("#")[0], f.rank, world), at=at)


def _writer(name: str, rank: int, world: int) -> int:
    """``rank`` if it writes round point ``name`` in a world of ``world``, else one that does."""
    if 0 <= rank < world and writes_point(name, rank):
        return rank
    if name in LEADER_POINTS:
        return 0
    if name in FOLLOWER_POINTS:
        return 1 + rank % max(1, world - 1)
    return rank % world



# ---- the harness-hosted store's faults, and torchrun's restarts --------------------------
# One launch may carry one hosted-store fault (``Phase.store_faults``): aggregation
# ``store_explicit`` (the store the harness hosts and the launches share), timed by a round
# point where a link fault could be (``no_round``), at round n at most the checkpoint count,
# beside no rank or link fault and no retry; ``sigstop`` stalls it 0 < ``stall_s`` <=
# ``MAX_STALL_S``. ``max_restarts`` > 0 (torchrun restarts the workers) needs rank faults at
# steps that fire in attempt 0 only (``restart: 0``), no agent kill or stop, one host, and a
# checkpoint if another launch follows (attempt 1 hands on its last).

STORE_ACTIONS: tuple[str, ...] = ("restart", "kill", "sigstop")
"""Hosted-store faults, simplest first: an empty store at once, a store gone, a stalled one."""
HOSTED_AGGREGATION = "store_explicit"
MAX_STALL_S = 30.0
RESTART_ACTIONS = ("raise", "exit", "sigkill", "sigterm")
"""Rank faults that end attempt 0 for torchrun to restart (an agent kill ends the launch)."""


class NoHostedStore(Enum):
    """Why a launch cannot carry a hosted-store fault, beyond ``NoRound``'s reasons."""

    NOT_HOSTED = "aggregation is not 'store_explicit', so the harness hosts no store to fault"


def no_store_fault(s: Scenario, i: int) -> NoRound | NoHostedStore | None:
    """Why launch ``i`` cannot carry a hosted-store fault (None: it can)."""
    if s.pipeline.aggregation != HOSTED_AGGREGATION:
        return NoHostedStore.NOT_HOSTED
    why = no_round(s, i)
    return None if why is NoRound.NOT_STORE else why


def store_fault_violations(s: Scenario, i: int) -> Iterator[Violation]:
    """The hosted-store fault and restart rules of launch ``i``."""

    ph, where = s.phases[i], f"phases[{i}]"
    if refusal(s, i) is not None:
        if ph.store_faults:
            yield Violation(f"{where}.store_faults", "a refused launch runs nothing, so has none")
        if ph.max_restarts:
            yield Violation(f"{where}.max_restarts", "a refused launch has nothing to restart")
        return
    if ph.store_faults:
        blocked = no_store_fault(s, i)
        if blocked is not None:
            yield Violation(
                f"{where}.store_faults", f"no round can time a store fault: {blocked.value}"
            )
        if len(ph.store_faults) > 1:
            yield Violation(f"{where}.store_faults", "at most one store fault a launch")
        if ph.rank_faults or ph.proxy_faults or ph.max_restarts:
            yield Violation(
                f"{where}.store_faults",
                "a launch with a store fault has no rank or link fault and no restarts "
                "(neither verdict would be clear)",
            )
    for j, f in enumerate(ph.store_faults):
        at = f"{where}.store_faults[{j}]"
        if f.action not in STORE_ACTIONS:
            yield Violation(f"{at}.action", f"must be one of {STORE_ACTIONS}")
        point = round_point(f.at)
        if point is None or point[0] == "start":
            yield Violation(
                f"{at}.at", f"{f.at!r} is not a round point ({', '.join(ROUND_PHASES)}) with an "
                "optional '#n' (n >= 1)"
            )
        elif point[1] > len(ph.checkpoints):
            yield Violation(
                f"{at}.at",
                f"round {point[1]} of {point[0]!r}, but the launch takes "
                f"{len(ph.checkpoints)} checkpoint(s)",
            )
        if not 0 < f.stall_s <= MAX_STALL_S:
            yield Violation(f"{at}.stall_s", f"must lie in (0, {MAX_STALL_S}] seconds")
    yield from _restart_violations(s, i)


def _restart_violations(s: Scenario, i: int) -> Iterator[Violation]:
    ph, where = s.phases[i], f"phases[{i}]"
    if ph.max_restarts < 0:
        yield Violation(f"{where}.max_restarts", "must be 0 or more")
    if ph.max_restarts <= 0:
        return
    if not ph.rank_faults:
        yield Violation(
            f"{where}.max_restarts",
            "restarts need a rank fault (restart: 0) that ends attempt 0; add one or use 0",
        )
    for j, f in enumerate(ph.rank_faults):
        if getattr(f, "at_round", False):
            yield Violation(
                f"{where}.rank_faults[{j}].at", "under max_restarts a rank fault fires at a step"
            )
        if f.restart != 0:
            yield Violation(
                f"{where}.rank_faults[{j}].restart",
                "must be 0 under max_restarts: a fault in every attempt uses up the restarts",
            )
        if f.action not in RESTART_ACTIONS:
            yield Violation(
                f"{where}.rank_faults[{j}].action",
                f"under max_restarts one of {RESTART_ACTIONS} (torchrun restarts ended workers)",
            )
    if ph.hosts != 1:
        yield Violation(f"{where}.max_restarts", "restarts are checked on one host")
    if i < len(s.phases) - 1 and ph.restore_point is None:
        yield Violation(
            f"{where}.checkpoints",
            "a restarted launch followed by another must checkpoint (attempt 1 hands it on)",
        )


def normalised_store_faults(s: Scenario, i: int, ph: Phase) -> Phase:
    """Launch ``i`` (``ph``: already normalised by the other rules) with its hosted-store
    fault and restarts made to obey the rules above."""
    if refusal(s, i) is not None or ph.expect_failure:
        return replace(ph, store_faults=(), max_restarts=0)
    here = s.with_(phases=(*s.phases[:i], ph, *s.phases[i + 1 :]))
    at_step = not any(getattr(f, "at_round", False) for f in ph.rank_faults)
    restarts = max(0, ph.max_restarts) if ph.rank_faults and at_step and ph.hosts == 1 else 0
    if restarts:
        faults = tuple(
            replace(f, restart=0) for f in ph.rank_faults if f.action in RESTART_ACTIONS
        )
        restarts = restarts if faults else 0
        ph = replace(ph, rank_faults=faults or ph.rank_faults, max_restarts=restarts)
        if faults and i < len(s.phases) - 1 and not ph.checkpoints:
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
