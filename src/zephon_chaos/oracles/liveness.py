"""Zephon's timing promises as an oracle: failure propagation and bounded waiting.

Two promises, derived from Zephon 0.2's own documentation (docs/liveness.md cites each):

* **failure propagation**: once one rank's checkpoint attempt fails, every other rank's
  ``checkpoint()`` of that round ends within ``T + 3 s`` (``T`` = ``aggregate_timeout_s``).
  A leader that fails publishes a failure notice to the round's outcome key, which wakes its
  followers at once; a follower that fails publishes nothing, so the others learn of it when
  the leader's budget (``T``, started no later than the failure, give or take the ranks' skew)
  runs out and the leader publishes its notice.
* **bounded waiting**: every step that waits on the store or on peers (each ``next()``,
  ``checkpoint()`` attempt, ``restore()``) ends within ``T`` plus a margin of ``2 T + 3 s``:
  the waits share one budget ``T`` from the call's entry; a storage operation in flight when it
  runs out is not interrupted but is itself bounded by ``T``, connection set-up included; a
  failing leader then writes its notice, one more bounded operation, possibly on a fresh
  connection. The first ``next()`` of a launch also starts Zephon's runners (no store wait),
  so it gets ``startup_s`` more.

Steps that a scheduled fault deliberately stalls (SIGSTOP, an interposer hold, the ``timeout``
toxic: a known defect) are excluded by the typed fault records of the launch, never by their
durations. A rank whose own store link a fault cuts (``down``, ``reset_peer``) cannot learn of
anything through the store: its calls are judged by the waiting bound, not as propagation.
All times are ``time.monotonic()`` (CLOCK_MONOTONIC), one clock for a host's ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from zephon_chaos.oracles.faults import overlap_s
from zephon_chaos.oracles.liveness_model import (
    LEADER,
    Effect,
    LivenessBounds,
    LivenessKind,
    LivenessProblem,
    LivenessVerdict,
    Propagation,
    Stall,
    Step,
    Timing,
)
from zephon_chaos.scenario_rules import STALLING_TOXICS
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, RankRecord
from zephon_chaos.workload.spec import PhaseTrigger, RankFault

STALLING_RANK_ACTIONS = frozenset({"sigstop"})
"""Rank faults (and interposer trigger actions) that stop a rank on purpose."""
STALLING_TRIGGER_ACTIONS = frozenset({"sigstop", "hold"})
CUTTING_TOXICS = frozenset({"down", "reset_peer"})
"""Link faults that cut a rank off from the store (``down``: the proxy is disabled)."""


def timings_of(rec: RankRecord) -> list[Timing]:
    """A rank's blocking calls, from its records (steps recorded without times are skipped)."""
    out: list[Timing] = []
    r = rec.rank
    if rec.restore_at is not None and rec.restore_s is not None:
        out.append(Timing(r, Step.RESTORE, rec.restore_at, rec.restore_s))
    fetches = [
        Timing(r, Step.FETCH, b.fetch_at, b.fetch_s, index=b.index)
        for b in rec.batches
        if b.fetch_at is not None and b.fetch_s is not None
    ]
    if rec.exhausted_fetch is not None:
        at, seconds = rec.exhausted_fetch
        fetches.append(Timing(r, Step.FETCH, at, seconds, index=rec.exhausted_after))
    error = rec.error
    if error is not None and error.get("fetch_at") is not None:
        at = float(error["fetch_at"])
        fetches.append(Timing(r, Step.FETCH, at, float(error["at"]) - at, ok=False))
    if fetches:
        first = min(fetches, key=lambda t: t.started_at)
        fetches = [replace(t, first=True) if t is first else t for t in fetches]
    out += fetches
    attempted: set[int] = set()
    for ev in rec.events:
        if ev.get("kind") == "checkpoint_attempt" and "ended_at" in ev:
            attempted.add(int(ev["index"]))
            out.append(
                Timing(
                    r,
                    Step.CHECKPOINT,
                    float(ev["started_at"]),
                    float(ev["ended_at"]) - float(ev["started_at"]),
                    index=int(ev["index"]),
                    attempt=int(ev["attempt"]),
                    ok=bool(ev.get("ok")),
                )
            )
    for c in rec.checkpoints:
        if c.index in attempted or c.started_at is None or c.ended_at is None:
            continue
        out.append(
            Timing(r, Step.CHECKPOINT, c.started_at, c.ended_at - c.started_at, c.index, 1, c.ok)
        )
    return out


def stalls_of(
    records: Iterable[RankRecord],
    *,
    rank_faults: Iterable[RankFault] = (),
    triggers: Iterable[PhaseTrigger] = (),
    start_toxics: Mapping[int, str] | None = None,
    interposer_events: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> list[Stall]:
    """The deliberate stalls of a launch, from its typed fault records.

    ``rank_faults``: the spec's rank faults (a stall counts from the rank's own ``fault``
    record, i.e. once it fired); ``triggers``: the interposer's (from its ``fired``/``held``
    event); ``start_toxics``: per rank, the toxic on its link from the launch's start.
    """
    stalls: list[Stall] = []
    stopping = {(f.rank, f.at_step) for f in rank_faults if f.action in STALLING_RANK_ACTIONS}
    for rec in records:
        for ev in rec.events:
            if ev.get("kind") == "fault" and (rec.rank, ev.get("at_step")) in stopping:
                since = ev.get("at")
                stalls.append(
                    Stall(rec.rank, f"{ev['action']} at step {ev['at_step']}", since=since)
                )
            elif ev.get("kind") == CHILD_FAULT_RECORD and ev.get("killed"):
                what = f"{ev['target']} killed at step {ev['at_step']}"
                stalls.append(Stall(rec.rank, what, ev.get("at"), Effect.RESPAWN))
    for rank, toxic in (start_toxics or {}).items():
        effect = _link_effect(toxic)
        if effect is not None:
            stalls.append(Stall(rank, f"{toxic} from the start", None, effect))
    events = interposer_events or {}
    for t in triggers:
        effect = _trigger_effect(t)
        if effect is None:
            continue
        for ev in events.get(t.rank, ()):
            if (
                ev.get("kind") in ("fired", "held")
                and ev.get("phase") == t.phase
                and ev.get("n") == t.occurrence
                and ev.get("action") == t.action
            ):
                what = t.toxic if t.action == "toxic" else t.action
                since = ev.get("t")
                stalls.append(Stall(t.rank, f"{what} at {t.phase}#{t.occurrence}", since, effect))
                break
    return stalls


def _link_effect(toxic: str) -> Effect | None:
    if toxic in STALLING_TOXICS:
        return Effect.STALL
    return Effect.CUT if toxic in CUTTING_TOXICS else None


def _trigger_effect(t: PhaseTrigger) -> Effect | None:
    if t.action in STALLING_TRIGGER_ACTIONS:
        return Effect.STALL
    if t.action == "cut":
        return Effect.CUT
    return _link_effect(t.toxic) if t.action == "toxic" else None


def judge(
    records: Sequence[RankRecord],
    *,
    phase: int,
    timeout_s: float,
    stalls: Sequence[Stall] = (),
    retry: str = "none",
    bounds: LivenessBounds | None = None,
    worker_processes: bool = False,
    held: Mapping[int, Sequence[tuple[float, float]]] | None = None,
) -> LivenessVerdict:
    """Judge one launch's records against both promises.

    ``held``: per rank, when a toxic on its store link held data back (a latency's delays):
    the network's time, not Zephon's. A wait is judged without the part of it they cover; a
    propagation lag without the part its rank's link or the leader's (which carries the
    notice) covers.

    ``worker_processes``: the pipelines start worker processes (``runner: process``,
    ``mtp_mode``) at their first ``next()``, which no timeout of Zephon's bounds (26-70 s a
    launch on 2 cores): that first fetch is not a wait on the store or on peers, so it is
    left out, as a stalled rank's calls are.

    ``retry``: the launch's checkpoint retry policy; under ``independent`` a rank's later
    attempts are rounds of its own, so only first attempts are rounds shared by every rank.
    """
    bounds = bounds or LivenessBounds()
    verdict = LivenessVerdict(phase, timeout_s, bounds, stalls=list(stalls))
    stopped = [s for s in stalls if s.effect is Effect.STALL]
    cut = [s for s in stalls if s.effect is Effect.CUT]
    respawning = [s for s in stalls if s.effect is Effect.RESPAWN]
    for rec in records:
        for t in timings_of(rec):
            waits_for_workers = t.step is Step.FETCH and any(s.covers(t) for s in respawning)
            if (
                any(s.covers(t) for s in stopped)
                or (worker_processes and t.first)
                or waits_for_workers
            ):
                verdict.excluded.append(t)
            else:
                verdict.timings.append(t)
    held = dict(held or {})
    for t in verdict.timings:
        bound = bounds.wait_bound_s(timeout_s, first_fetch=t.first)
        own = t.seconds - overlap_s(held.get(t.rank, ()), t.started_at, t.ended_at)
        if own > bound:
            verdict.problems.append(
                LivenessProblem(
                    LivenessKind.UNBOUNDED_WAIT,
                    phase,
                    t.step,
                    t.index if t.step is Step.CHECKPOINT else None,
                    t.rank,
                    own,
                    bound,
                    t.attempt,
                )
            )
    bound = bounds.propagation_bound_s(timeout_s)
    for p in propagations(verdict.timings, retry=retry, cut=cut):
        verdict.propagations.append(p)
        for rank, lag in sorted(p.lags.items()):
            network = [*held.get(rank, ()), *(held.get(LEADER, ()) if rank != LEADER else ())]
            began = p.since.get(rank, p.failed_at)
            lag -= overlap_s(network, began, began + lag)
            if lag > bound:
                verdict.problems.append(
                    LivenessProblem(
                        LivenessKind.SLOW_PROPAGATION,
                        phase,
                        Step.CHECKPOINT,
                        p.index,
                        rank,
                        lag,
                        bound,
                        p.attempt,
                    )
                )
    return verdict


def propagations(
    timings: Iterable[Timing], *, retry: str = "none", cut: Sequence[Stall] = ()
) -> list[Propagation]:
    """Every failed round: the first failure, and how long after it each other rank ended.

    A rank ``cut`` off from the store during its call can still fail first, but its own end
    measures its link, not how the failure reached it.
    """
    rounds: dict[tuple[int, int], list[Timing]] = {}
    for t in timings:
        if t.step is Step.CHECKPOINT and t.index is not None:
            if retry == "independent" and t.attempt > 1:
                continue
            rounds.setdefault((t.index, t.attempt), []).append(t)
    out = []
    for (index, attempt), calls in sorted(rounds.items()):
        failed = [t for t in calls if not t.ok]
        if not failed:
            continue
        first = min(failed, key=lambda t: t.ended_at)
        # From the failure, or from the rank's own call if it came later: a rank learns of
        # nothing before it calls, and a leader that calls late waits its own budget then.
        others = [t for t in calls if t.rank != first.rank and not any(s.covers(t) for s in cut)]
        since = {t.rank: max(first.ended_at, t.started_at) for t in others}
        lags = {t.rank: t.ended_at - since[t.rank] for t in others}
        out.append(Propagation(index, attempt, first.rank, first.ended_at, lags, since))
    return out


class _Run(Protocol):
    """What :func:`judge_run` reads of a runner's ``PhaseRun``."""

    index: int
    records: list[RankRecord]

    @property
    def spec(self) -> Any: ...

    @property
    def phase(self) -> Any: ...


def _torn_down(result: Any) -> list[Stall]:
    """Ranks the harness ended with their failed group, from when it began (in process: the
    launch's store released, an exception raised in the threads): what their calls measured
    from then on is the teardown, where torchrun's SIGTERM would have left no record."""
    since = getattr(result, "torn_down_at", None)
    if since is None:
        return []
    cause = "ended with its failed group by the harness"
    return [Stall(r.rank, cause, since) for r in result.ranks if r.killed_by_harness]


def judge_run(run: _Run, bounds: LivenessBounds | None = None) -> LivenessVerdict:
    """Judge a runner's launch: its records, with the stalls its spec and faults schedule."""
    from zephon_chaos.faults.interposer import read_events

    spec = run.spec
    start = {f.rank: f.toxic for f in getattr(run.phase, "proxy_faults", ()) if f.at == "start"}
    stalls = stalls_of(
        run.records,
        rank_faults=spec.faults,
        triggers=spec.triggers,
        start_toxics=start,
        interposer_events={
            t.rank: read_events(spec.out_dir, t.rank)
            for t in spec.triggers
            if _trigger_effect(t) is not None
        },
    )
    return judge(
        run.records,
        phase=run.index,
        timeout_s=spec.pipeline.aggregate_timeout_s,
        stalls=[*stalls, *_torn_down(getattr(run, "result", None))],
        worker_processes=spec.pipeline.runner == "process" or bool(spec.pipeline.mtp_mode),
        retry=spec.retry,
        bounds=bounds,
        held=getattr(run, "held", None),
    )
