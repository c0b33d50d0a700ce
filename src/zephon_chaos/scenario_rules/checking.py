"""The checking view: what a scenario breaks, each a ``RuleBreach`` naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import astuple
from typing import TYPE_CHECKING

from zephon_chaos.workload.spec import (
    AGREEING_RETRIES,
    CHILD_TARGETS,
    COLLECTIVE_FORMATS,
    LINK_HEALS,
    NEVER,
    ROUND_PHASES,
    RankFault,
)

if TYPE_CHECKING:
    from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.scenario_rules.hosted import store_fault_violations
from zephon_chaos.scenario_rules.predicates import (
    CHANGED_C_ERROR,
    CHILD_TAIL_ROWS,
    HEALING_TOXICS,
    LEADER_POINTS,
    RANK_POINT_ACTIONS,
    REFUSAL_ERROR,
    ROUND_ONLY_ACTIONS,
    RUN_DRY_STEPS,
    STREAMS,
    Refusal,
    Rule,
    RuleBreach,
    cannot_run_dry,
    child_tail_steps,
    clash,
    faulted_otherwise,
    is_finite,
    lag_fits,
    lanes_per_rank,
    missing_point,
    no_point_round,
    no_round,
    own_workers,
    rank_point,
    refusal,
    restored_c,
    retried,
    round_point,
    writes_point,
)


def violations(s: Scenario) -> list[RuleBreach]:
    """Every rule ``s`` breaks, launch by launch (structure is ``Scenario.validate``'s)."""
    out: list[RuleBreach] = [v for i in range(len(s.launches)) for v in _layout_violations(s, i)]
    if out:  # the other rules count DP groups: they need whole ones
        return out
    for i in range(len(s.launches)):
        out += _launch_violations(s, i)
        out += store_fault_violations(s, i)
    last = len(s.launches) - 1
    if is_finite(s.data) and cannot_run_dry(s):
        out.append(
            RuleBreach(
                f"launches[{last}].steps",
                f"{s.launches[last].steps} steps cannot run the finite data dry, so lanes would "
                f"stop out of step; give the last launch more steps (say {RUN_DRY_STEPS})",
                Rule.RUN_DRY,
            )
        )
    return out


def _launch_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    ph, where = s.launches[i], f"launches[{i}]"
    c = s.canonical_replicas(i)
    why = refusal(s, i)
    if why is not None:
        yield from _refused_violations(ph, where, why, c, restored_c(s, i))
        return
    if ph.expect_failure:
        yield RuleBreach(
            f"{where}.expect_failure",
            f"Zephon accepts this launch ({ph.world_size} rank(s) <= C={c}, C unchanged), so "
            "it must not be expected to fail",
            Rule.ACCEPTED_NOT_EXPECTED_TO_FAIL,
        )
    if ph.expect_error:
        yield RuleBreach(
            f"{where}.expect_error",
            "only a launch expected to fail names an error",
            Rule.ERROR_ONLY_WHEN_REFUSED,
        )
    yield from _checkpoint_violations(s, i)
    yield from _rank_fault_violations(s, i)
    yield from _link_fault_violations(s, i)
    yield from _sync_violations(s, i)
    yield from _child_fault_violations(s, i)


def _layout_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    ph, where, c = s.launches[i], f"launches[{i}]", s.canonical_replicas(i)
    if ph.tp < 1 or ph.world_size % ph.tp:
        yield RuleBreach(
            f"{where}.tp",
            f"{ph.tp} must divide world_size {ph.world_size} (DP groups of tp ranks each)",
            Rule.TP_DIVIDES_WORLD,
        )
    elif ph.tp > 1 and ph.dp <= c and c % ph.dp:
        yield RuleBreach(
            f"{where}.tp",
            f"with tp {ph.tp} the launch has {ph.dp} DP groups, and C={c} is not a multiple of "
            "them, which the downstream adapter refuses; use tp 1 or a C that they divide",
            Rule.TP_C_MULTIPLE_OF_DP,
        )


def _refused_violations(
    ph: Launch, where: str, why: Refusal, c: int, before: int | None
) -> Iterator[RuleBreach]:
    if not ph.expect_failure:
        if why is Refusal.MORE_RANKS_THAN_LANES:
            yield RuleBreach(
                f"{where}.world_size",
                f"{ph.world_size} ranks exceed canonical_replicas={c}, which Zephon refuses; "
                f"set expect_failure and expect_error {REFUSAL_ERROR!r} to check the refusal",
                Rule.MORE_GROUPS_THAN_C_EXPECTED,
            )
        else:
            yield RuleBreach(
                f"{where}.canonical_replicas",
                f"C={c} differs from the C={before} of the checkpoint this launch restores, "
                f"which Zephon refuses; set expect_failure and expect_error {CHANGED_C_ERROR!r}",
                Rule.CHANGED_C_EXPECTED,
            )
        return
    if not ph.expect_error:
        # Any text: it is a claim about Zephon's message, which the runner checks.
        yield RuleBreach(
            f"{where}.expect_error",
            f"a refused launch names the error it expects (Zephon's is {why.value!r})",
            Rule.REFUSED_NAMES_ERROR,
        )
    for name in ("checkpoints", "rank_faults", "proxy_faults", "lags", "child_faults"):
        if getattr(ph, name):
            yield RuleBreach(
                f"{where}.{name}",
                "a refused launch runs nothing, so has none",
                Rule.REFUSED_RUNS_NOTHING,
            )
    if ph.retry != "none":
        yield RuleBreach(
            f"{where}.retry",
            "a refused launch takes no checkpoint to retry",
            Rule.REFUSED_NO_RETRY,
        )


def _checkpoint_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    ph, where = s.launches[i], f"launches[{i}]"
    for j, cp in enumerate(ph.checkpoints):
        if not (cp.step >= 0 and cp.extra >= 0 and (cp.step, cp.extra) <= (ph.steps, 0)):
            yield RuleBreach(
                f"{where}.checkpoints[{j}]",
                f"must lie within the launch's {ph.steps} steps",
                Rule.CHECKPOINT_WITHIN_STEPS,
            )
            return
    if i < len(s.launches) - 1 and not ph.rank_faults and ph.restore_point is None:
        yield RuleBreach(
            f"{where}.checkpoints",
            "a launch followed by another must checkpoint (the next one restores from it)",
            Rule.FOLLOWED_LAUNCH_CHECKPOINTS,
        )
    order = sorted(range(len(ph.checkpoints)), key=lambda j: astuple(ph.checkpoints[j]))
    for k, j in enumerate(order):
        earlier = [ph.checkpoints[e] for e in order[:k]]
        c, mapping = s.canonical_replicas(i), s.pipeline.mapping
        hit = clash(earlier, ph.checkpoints[j], ph.world_size, c, mapping, ph.tp)
        if hit is not None:
            per = lanes_per_rank(ph.world_size, c, mapping, ph.tp)
            yield RuleBreach(
                f"{where}.checkpoints[{j}]",
                f"falls on the same batch as checkpoints[{order[hit[0]]}] on rank {hit[1]} "
                f"({per[hit[1]]} lane(s) a step), so ranks would checkpoint a different number "
                "of times; drop one or move it",
                Rule.CHECKPOINTS_COLLECTIVE,
            )
            return


def _rank_fault_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    ph, where = s.launches[i], f"launches[{i}]"
    if ph.rank_faults and is_finite(s.data):
        yield RuleBreach(
            f"{where}.rank_faults",
            "over finite data a rank whose data ran out never reaches its fault; "
            "use endless sources (exhausted: repeat) or drop the fault",
            Rule.RANK_FAULT_FINITE_DATA,
        )
    if ph.rank_faults and ph.proxy_faults:
        yield RuleBreach(
            f"{where}.rank_faults",
            "a launch with a link fault has no rank fault (neither verdict would be clear)",
            Rule.RANK_FAULT_BESIDE_LINK_FAULT,
        )
    if len(ph.rank_faults) > 1 and any(f.at_round for f in ph.rank_faults):
        yield RuleBreach(
            f"{where}.rank_faults",
            "a launch with a round-point rank fault has no other (one fault, one verdict)",
            Rule.ONE_ROUND_POINT_FAULT,
        )
    for j, f in enumerate(ph.rank_faults):
        if not 0 <= f.rank < ph.world_size:
            yield RuleBreach(
                f"{where}.rank_faults[{j}].rank",
                f"must name a rank of the launch's {ph.world_size}",
                Rule.RANK_FAULT_RANK,
            )
        if f.at_round:
            yield from _rank_point_violations(s, i, f, f"{where}.rank_faults[{j}]")
            continue
        if not 0 <= f.at_step <= ph.steps:
            yield RuleBreach(
                f"{where}.rank_faults[{j}].at_step",
                f"must lie within the launch's {ph.steps} steps",
                Rule.RANK_FAULT_STEP_WITHIN,
            )
        if f.action in ROUND_ONLY_ACTIONS:
            yield RuleBreach(
                f"{where}.rank_faults[{j}].at",
                f"a {f.action} at a step has nothing to continue it: time it by a round point "
                f"({', '.join(ROUND_PHASES)})",
                Rule.STOP_AT_STEP,
            )


def _rank_point_violations(s: Scenario, i: int, f: RankFault, where: str) -> Iterator[RuleBreach]:
    ph = s.launches[i]
    point = rank_point(f)
    if point is None:
        yield RuleBreach(
            f"{where}.at",
            f"{f.at!r} is not 'step' or a round point ({', '.join(ROUND_PHASES)}) with an "
            "optional '#n' (n >= 1)",
            Rule.RANK_POINT_MALFORMED,
        )
        return
    name, n = point
    if f.action not in RANK_POINT_ACTIONS:
        yield RuleBreach(
            f"{where}.action",
            f"{f.action!r} is not a round-point fault; one of {', '.join(RANK_POINT_ACTIONS)}",
            Rule.RANK_POINT_ACTION,
        )
    blocked, missing = no_point_round(s, i), missing_point(s, name)
    if blocked is not None:
        yield RuleBreach(
            f"{where}.at",
            f"no round can time a rank fault: {blocked.value}",
            blocked.rank_point_rule,
        )
    elif missing is not None:
        yield RuleBreach(
            f"{where}.at", f"no rank writes {name!r}: {missing.value}", Rule.RANK_POINT_NOT_ON_DIR
        )
    elif 0 <= f.rank < ph.world_size and not writes_point(name, f.rank):
        who = "the leader (rank 0)" if name in LEADER_POINTS else "followers (not rank 0)"
        yield RuleBreach(
            f"{where}.rank",
            f"only {who} write(s) {name!r}: rank {f.rank} never does",
            Rule.RANK_POINT_WRITER,
        )
    if n > len(ph.checkpoints):
        yield RuleBreach(
            f"{where}.at",
            f"round {n} of {name!r}, but the launch takes {len(ph.checkpoints)} checkpoint(s)",
            Rule.RANK_POINT_ROUND_COUNT,
        )


def _link_fault_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    ph, where = s.launches[i], f"launches[{i}]"
    if not ph.proxy_faults:
        if ph.retry != "none" and not any(retried(f) for f in ph.rank_faults) and not ph.lags:
            yield RuleBreach(
                f"{where}.retry",
                f"retry {ph.retry!r} needs a link fault, a round-point rank fault that leaves its "
                "rank alive (raise, sigstop) or a lag to fail a round; without one use 'none'",
                Rule.RETRY_NEEDS_FAILURE,
            )
        return
    blocked = no_round(s, i)
    if blocked is not None:
        yield RuleBreach(
            f"{where}.proxy_faults",
            f"no round can time a link fault: {blocked.value}",
            blocked.link_fault_rule,
        )
    for j, f in enumerate(ph.proxy_faults):
        yield from _fault_violations(f, f"{where}.proxy_faults[{j}]", ph)


def _fault_violations(f: ProxyFault, where: str, ph: Launch) -> Iterator[RuleBreach]:
    point = round_point(f.at)
    if point is None:
        yield RuleBreach(
            f"{where}.at",
            f"{f.at!r} is not 'start' or a round point ({', '.join(ROUND_PHASES)}) with an "
            "optional '#n' (n >= 1)",
            Rule.LINK_FAULT_MALFORMED,
        )
        return
    name, n = point
    if not 0 <= f.rank < ph.world_size:
        yield RuleBreach(
            f"{where}.rank",
            f"must name a rank of the launch's {ph.world_size}",
            Rule.LINK_FAULT_RANK,
        )
    elif not writes_point(name, f.rank):
        who = "the leader (rank 0)" if name in LEADER_POINTS else "followers (not rank 0)"
        yield RuleBreach(
            f"{where}.rank",
            f"only {who} write(s) {name!r}: rank {f.rank} never does",
            Rule.LINK_FAULT_WRITER,
        )
    if f.stream not in STREAMS:
        yield RuleBreach(f"{where}.stream", f"must be one of {STREAMS}", Rule.LINK_FAULT_STREAM)
    if f.toxic == "reset_peer" and name == "start":
        yield RuleBreach(
            f"{where}.at",
            "a reset_peer at start resets nothing: time it by a round",
            Rule.RESET_AT_START,
        )
    if n > len(ph.checkpoints):
        yield RuleBreach(
            f"{where}.at",
            f"round {n} of {name!r}, but the launch takes {len(ph.checkpoints)} checkpoint(s)",
            Rule.LINK_FAULT_ROUND_COUNT,
        )
    yield from _heal_violations(f, where, name)


def _heal_violations(f: ProxyFault, where: str, point: str) -> Iterator[RuleBreach]:
    """``until``: a known end, of a fault that fails a round's store operation (healing a
    slow link proves nothing, a stalled one never lets its round end), timed by a round."""
    if f.until not in LINK_HEALS:
        yield RuleBreach(f"{where}.until", f"must be one of {LINK_HEALS}", Rule.LINK_HEAL_KNOWN)
        return
    if not f.heals:
        return
    if f.toxic not in HEALING_TOXICS:
        yield RuleBreach(
            f"{where}.until",
            f"only {', '.join(HEALING_TOXICS)} end(s) with a round, not {f.toxic!r}; give "
            f"until {NEVER!r}",
            Rule.LINK_HEAL_TOXIC,
        )
    if point == "start":
        yield RuleBreach(
            f"{where}.until",
            "a fault from the start ends with no round of its own (a link down from the start "
            f"fails the pipeline's start): time it by a round point, or give until {NEVER!r}",
            Rule.LINK_HEAL_AT_ROUND,
        )


def _sync_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    """``sync: free`` needs two ranks; a lag needs ``free``, a checkpoint, no other fault;
    a drift of whole intervals no agreement, and independent retry no collective save."""
    ph, where = s.launches[i], f"launches[{i}]"
    if ph.sync == "free" and ph.world_size < 2:
        yield RuleBreach(
            f"{where}.sync",
            "one rank is never late for another: 'free' needs two or more ranks; use 'lockstep'",
            Rule.FREE_NEEDS_TWO,
        )
    if not ph.lags:
        return
    if ph.sync != "free":
        yield RuleBreach(
            f"{where}.lags",
            "a lag needs sync 'free': lockstep ranks meet before each checkpoint, so the "
            "lagging rank and the one it waits for would wait for each other",
            Rule.LAG_NEEDS_FREE,
        )
    if len(ph.lags) > 1:
        yield RuleBreach(
            f"{where}.lags",
            "at most one lag a launch (two could wait on each other)",
            Rule.ONE_LAG,
        )
    if ph.rank_faults or ph.proxy_faults:
        yield RuleBreach(
            f"{where}.lags",
            "a launch with a lag has no other fault (one cause, one verdict)",
            Rule.LAG_ALONE,
        )
    if ph.tp > 1:
        yield RuleBreach(
            f"{where}.lags",
            f"no lag with tp={ph.tp}: the tensor-parallel ranks of a DP group run every "
            "step together (the model's collectives), so one of them cannot call "
            "checkpoint() late while its peer draws on; use tp 1",
            Rule.LAG_TP_PEERS,
        )
    drifting = [lag for lag in ph.lags if lag.by > 0]
    if drifting and ph.retry in AGREEING_RETRIES:
        yield RuleBreach(
            f"{where}.retry",
            f"no {ph.retry!r} retry beside a lag of {drifting[0].by} whole interval(s): the "
            "awaited rank's agreement after its failed call waits for the lagging rank, which "
            "waits for that rank's later call (a deadlock); use none, independent, or by 0",
            Rule.LAG_DRIFT_NO_AGREEMENT,
        )
    if ph.retry == "independent" and s.persist_format in COLLECTIVE_FORMATS:
        yield RuleBreach(
            f"{where}.retry",
            f"no 'independent' retry beside a lag under {s.persist_format!r} persistence: a "
            "rank that gave up a checkpoint makes no collective save while a peer that got "
            "it waits in one; use another format or another policy",
            Rule.LAG_INDEPENDENT_COLLECTIVE_SAVE,
        )
    for j, lag in enumerate(ph.lags):
        if not lag_fits(lag, ph):
            yield RuleBreach(
                f"{where}.lags[{j}]",
                f"must name two different ranks of the launch's {ph.world_size}, and one of its "
                f"{len(ph.checkpoints)} checkpoint(s) (0-based) that lies, with the {lag.by} "
                "interval(s) it drifts behind, within them",
                Rule.LAG_FITS,
            )


def _child_fault_violations(s: Scenario, i: int) -> Iterator[RuleBreach]:
    """A child fault needs worker processes to kill, endless data (a rank whose data ran out
    never reaches it), ranks in lockstep, and no other fault in its launch."""
    ph, where = s.launches[i], f"launches[{i}]"
    if not ph.child_faults:
        return
    if not own_workers(s.pipeline):
        yield RuleBreach(
            f"{where}.child_faults",
            "only runner 'process' without mtp_mode gives a rank worker processes of its own "
            "to kill (under mtp_mode they are the MTP child's)",
            Rule.CHILD_FAULT_MTP_MODE
            if s.pipeline.runner == "process"
            else Rule.CHILD_FAULT_NO_WORKERS,
        )
    if is_finite(s.data):
        yield RuleBreach(
            f"{where}.child_faults",
            "over finite data a rank whose data ran out never reaches its fault; "
            "use endless sources (exhausted: repeat) or drop the fault",
            Rule.CHILD_FAULT_FINITE_DATA,
        )
    if faulted_otherwise(ph) or len(ph.child_faults) > 1:
        yield RuleBreach(
            f"{where}.child_faults",
            "a launch with a child fault has no other fault, another child fault included "
            "(one cause, one verdict)",
            Rule.CHILD_FAULT_ALONE,
        )
    if ph.sync != "lockstep":
        yield RuleBreach(
            f"{where}.sync",
            "a child fault needs sync 'lockstep': a rank waiting for its replacement workers "
            "arrives late, which under 'free' fails the round by design",
            Rule.CHILD_FAULT_LOCKSTEP,
        )
    for j, f in enumerate(ph.child_faults):
        if f.target not in CHILD_TARGETS:
            yield RuleBreach(
                f"{where}.child_faults[{j}].target",
                f"must be one of {CHILD_TARGETS}",
                Rule.CHILD_FAULT_TARGET,
            )
        if not 0 <= f.rank < ph.world_size:
            yield RuleBreach(
                f"{where}.child_faults[{j}].rank",
                f"must name a rank of the launch's {ph.world_size}",
                Rule.CHILD_FAULT_RANK,
            )
        if not 1 <= f.at_step <= ph.steps:
            yield RuleBreach(
                f"{where}.child_faults[{j}].at_step",
                f"must lie within steps 1..{ph.steps}: Zephon starts the workers at the first "
                "batch, so at step 0 there is nothing to kill",
                Rule.CHILD_FAULT_STEP,
            )
        elif f.at_step < ph.steps < f.at_step + (tail := child_tail_steps(s, i, f.rank)):
            yield RuleBreach(
                f"{where}.steps",
                f"a launch draws {CHILD_TAIL_ROWS} rows or more on the rank after a mid-launch "
                f"child fault ({tail} steps here: say {f.at_step + tail}), more than Zephon's "
                "buffers hold, so that the rank needs replacement workers; or kill at the last "
                "step",
                Rule.CHILD_FAULT_TAIL,
            )
