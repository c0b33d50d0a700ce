"""What happened in a scenario's launches, per rank, as values a picture is drawn from.

Built from the runner's outcome alone: the rank records (batches, checkpoint attempts with
their monotonic times, faults that fired, errors), each launch's exit statuses, and the
oracles' verdicts (the liveness bounds, the batches compared). Nothing is parsed from a
message. Times are seconds since the launch's earliest record (one clock for a host's ranks).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.launch.exitcodes import signal_name
from zephon_chaos.launch.result import CutShort, RankOutcome, error_type
from zephon_chaos.nemeses.scenario_proxy import parse_at
from zephon_chaos.oracles.dp_groups import representatives
from zephon_chaos.oracles.liveness_model import Step
from zephon_chaos.problem import Problem
from zephon_chaos.runner import PhaseRun, ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.workload.records import BEGAN_RECORD, CHILD_FAULT_RECORD, RankRecord

MAX_RANKS = 16
"""Ranks drawn per launch; the launch's title counts the others."""
TIMED_RECORDS = frozenset(
    {BEGAN_RECORD, "error", "fault", CHILD_FAULT_RECORD, "lag", "checkpoint_attempt"}
)
"""The rank records (besides batches, checkpoints, restore) that hold monotonic times."""
TIME_FIELDS = ("at", "began_at", "started_at", "ended_at")
EventsOf = Callable[[PhaseRun, int], list[dict[str, Any]]]
"""A launch's and rank's store-interposer events (``faults.interposer.read_events``)."""


class Outcome(str, Enum):
    """How one checkpoint attempt ended on one rank."""

    COMPLETED = "completed"
    FAILED = "failed"
    DISCARDED = "succeeded here, failed on another rank"
    SKIPPED = "failed, trained past (retry skip)"


class ExitKind(str, Enum):
    """How a rank's process (or thread) ended."""

    CLEAN = "clean"
    ERROR = "error"
    SIGNAL = "killed by a signal"
    STOPPED = "stopped after another rank failed"
    DEADLINE = "hung: ended at the launch's deadline"
    CUT_SHORT = "hung: cut short as a known hang"
    """Ended before its deadline, its launch's stacks recognised as a known hang."""
    UNKNOWN = "unknown"


class FaultSource(str, Enum):
    RANK = "rank"
    """A scheduled rank fault (its ``fault`` record)."""
    CHILDREN = "children"
    """The rank killed its pipeline's workers."""
    ROUND = "round"
    """The store interposer fired (or held) on a round point."""
    LAG = "lag"
    """The rank waited on purpose before a checkpoint (``RankLag``)."""


@dataclass(frozen=True)
class Attempt:
    index: int
    attempt: int
    outcome: Outcome
    start_s: float
    seconds: float
    bound_s: float
    """``aggregate_timeout_s``: Zephon's budget of one call."""
    cause: str | None = None
    """The error the call raised, as recorded (``Type: message``)."""
    liveness_bound_s: float | None = None
    """The liveness oracle's bound for the call, where it judged it (None: no liveness verdict)."""
    over_liveness: bool = False
    """The liveness verdict found this call over its bound."""

    @property
    def cause_type(self) -> str | None:
        return error_type(self.cause)


@dataclass(frozen=True)
class Fault:
    source: FaultSource
    action: str
    """What it did: the rank fault's action, the children's target, the interposer's action
    (the toxic's type for a link fault, ``store <action>`` for a store fault), ``lag``."""
    at_s: float
    until_s: float | None = None
    """The end of a fault that lasts (a lag); None: an instant."""
    step: int | None = None
    """The step it fired before (rank and children faults)."""
    point: tuple[str, int] | None = None
    """The round point it fired on: (phase, n-th write), e.g. (``announce``, 1)."""
    peer: int | None = None
    """The rank a lag waited for."""


@dataclass(frozen=True)
class Exit:
    kind: ExitKind
    at_s: float | None
    """When, where the records say (None: at the launch's end)."""
    error: str | None = None
    """What it raised, as its exit status or its records say (``Type: message``)."""
    signal: str | None = None
    scheduled: bool = False
    """A scheduled fault of the rank's own ended it."""

    @property
    def error_type(self) -> str | None:
        return error_type(self.error)


@dataclass(frozen=True)
class RankLane:
    rank: int
    lanes: tuple[int, ...]
    batches: tuple[float, ...]
    """When each batch's ``next()`` returned."""
    kept: int
    """How many of ``batches`` (the first ones) the batch verdict compared."""
    attempts: tuple[Attempt, ...]
    faults: tuple[Fault, ...]
    exit: Exit
    restore: tuple[float, float] | None = None
    """(start, seconds) of its ``restore()``."""
    link: tuple[tuple[float, float | None, str], ...] = ()
    """Its store link faulted: (from, to or None: the end, toxic)."""


@dataclass(frozen=True)
class LaunchHappened:
    index: int
    world_size: int
    canonical_replicas: int
    refused: bool
    ok: bool
    timed_out: bool
    retry: str
    ranks: tuple[RankLane, ...]
    end_s: float
    restored: tuple[int, int] | None = None
    """(launch, checkpoint) it restored."""
    first_failure: int | None = None
    """The rank the launch's result names as its first failure."""
    unfired: tuple[object, ...] = ()
    """Faults it planned that left no record of firing."""
    ran: bool = True
    """False: the scenario ended before this launch (or never ran): only its plan is known."""
    cut_short: CutShort | None = None
    """A hang ended before its deadline as the known hang it showed (``launch.hangwatch``)."""


@dataclass(frozen=True)
class BatchViolation:
    contract: str
    kind: str
    step: int | None
    lane: int | None
    lost: Mapping[int, int]
    repeated: Mapping[int, int]
    at: tuple[int, int, float] | None = None
    """(launch, rank, time) of the batch that delivered the first divergent step."""

    @property
    def lanes(self) -> set[int]:
        first = set() if self.lane is None else {self.lane}
        return set(self.lost) | set(self.repeated) | first


@dataclass(frozen=True)
class Happened:
    launches: tuple[LaunchHappened, ...]
    batches: BatchViolation | None
    problems: tuple[Problem, ...]
    harness: tuple[HarnessGap, ...] = ()


def happened(outcome: ScenarioOutcome, events_of: EventsOf | None = None) -> Happened:
    """What ``outcome``'s launches did; ``events_of`` reads the interposer's events (none if
    not given)."""
    kept: dict[int | None, int | None] = {
        k.phase: k.keep_before_checkpoint for k in outcome.kept if k.phase is not None
    }
    if outcome.verdict is None:  # no batches compared: none drawn as left out
        kept = {run.index: None for run in outcome.phases}
    launches = []
    for run in outcome.phases:
        events = {r: events_of(run, r) for r in range(len(run.records))} if events_of else {}
        launches.append(_launch(outcome, run, kept, events))
    ran = {run.index for run in outcome.phases}
    scenario = outcome.scenario
    launches += [_not_run(scenario, i) for i in range(len(scenario.launches)) if i not in ran]
    launches.sort(key=lambda launch: launch.index)
    harness = tuple(h.gap for h in outcome.harness_problems)
    return Happened(tuple(launches), _batches(outcome, launches), tuple(outcome.problems), harness)


def planned(scenario: Scenario) -> Happened:
    """A scenario that did not run (no outcome): its launches, nothing recorded."""
    return Happened(tuple(_not_run(scenario, i) for i in range(len(scenario.launches))), None, ())


def _not_run(scenario: Scenario, i: int) -> LaunchHappened:
    """Launch ``i`` as planned: it never ran (the scenario ended before it, or nothing ran)."""
    ph = scenario.launches[i]
    c = scenario.canonical_replicas(i)
    lanes = tuple(
        RankLane(r, (), (), 0, (), (), Exit(ExitKind.UNKNOWN, None))
        for r in range(min(ph.world_size, MAX_RANKS))
    )
    faults = (*ph.rank_faults, *ph.child_faults, *ph.proxy_faults, *ph.store_faults)
    refused = ph.expect_failure or ph.dp > c
    return LaunchHappened(i, ph.world_size, c, refused, True, False, ph.retry, lanes, 0.0,
                          unfired=faults, ran=False)  # fmt: skip


def _times(rec: RankRecord, events: Iterable[Mapping[str, Any]]) -> list[float]:
    """Every monotonic time a rank's records (and its interposer's events) hold."""
    timed = [e for e in rec.events if e.get("kind") in TIMED_RECORDS]
    out = [float(e[key]) for e in timed for key in TIME_FIELDS if key in e]
    out += [b.fetch_at + (b.fetch_s or 0.0) for b in rec.batches if b.fetch_at is not None]
    out += [sum(rec.exhausted_fetch)] if rec.exhausted_fetch is not None else []
    out += [c.started_at for c in rec.checkpoints if c.started_at is not None]
    out += [c.ended_at for c in rec.checkpoints if c.ended_at is not None]
    out += [rec.restore_at] if rec.restore_at is not None else []
    out += [float(e["t"]) for e in events if isinstance(e.get("t"), (int, float))]
    return out


def _launch(
    outcome: ScenarioOutcome,
    run: PhaseRun,
    kept: Mapping[int | None, int | None],
    events: Mapping[int, list[dict[str, Any]]],
) -> LaunchHappened:
    scenario, ph = outcome.scenario, run.phase
    c = scenario.canonical_replicas(run.index)
    stamps = [t for rec in run.records for t in _times(rec, events.get(rec.rank, []))]
    origin = min(stamps, default=0.0)
    timeout_s = run.spec.pipeline.aggregate_timeout_s
    keep_before = kept.get(run.index, 0)
    ranks = []
    for rec in run.records[:MAX_RANKS]:
        outcome_of = next((o for o in run.result.ranks if o.rank == rec.rank), None)
        ranks.append(
            _rank(run, rec, outcome_of, origin, timeout_s, keep_before, events.get(rec.rank, []))
        )
    last = max(stamps, default=origin) - origin
    if run.result.torn_down_at is not None and stamps:
        last = max(last, run.result.torn_down_at - origin)
    return LaunchHappened(
        run.index,
        ph.world_size,
        c,
        ph.expect_failure or ph.dp > c,
        run.result.ok,
        run.result.timed_out,
        ph.retry,
        tuple(ranks),
        last,
        _restored(outcome, run),
        None if run.result.first_failure is None else run.result.first_failure.rank,
        _unfired(run, events),
        cut_short=run.result.cut_short,
    )


def _rank(
    run: PhaseRun,
    rec: RankRecord,
    result: RankOutcome | None,
    origin: float,
    timeout_s: float,
    keep_before: int | None,
    events: list[dict[str, Any]],
) -> RankLane:
    def rel(t: float) -> float:
        return t - origin

    batches = tuple(
        rel(b.fetch_at + (b.fetch_s or 0.0)) for b in rec.batches if b.fetch_at is not None
    )
    if keep_before is None:
        kept = len(batches)
    else:
        kept = sum(1 for b in rec.batches if b.checkpoints_before < keep_before)
    restore = None
    if rec.restore_at is not None and rec.restore_s is not None:
        restore = (rel(rec.restore_at), rec.restore_s)
    ph = run.phase
    link = tuple(
        (0.0, None, f.toxic) for f in ph.proxy_faults if (f.rank, f.at) == (rec.rank, "start")
    )
    link += tuple((rel(a), rel(b), "held") for a, b in run.held.get(rec.rank, []))
    return RankLane(
        rec.rank,
        tuple(rec.lanes),
        batches,
        min(kept, len(batches)),
        _attempts(run, rec, rel, timeout_s),
        _faults(run, rec, rel, events),
        _exit(run, rec, result, rel),
        restore,
        link,
    )


class _Call(NamedTuple):
    index: int
    attempt: int
    ok: bool
    error: str | None
    started_at: float
    ended_at: float


def _attempts(
    run: PhaseRun, rec: RankRecord, rel: Callable[[float], float], timeout_s: float
) -> tuple[Attempt, ...]:
    """Each ``checkpoint()`` call: a retry policy's ``checkpoint_attempt`` records, else the
    one ``checkpoint`` record. A call that succeeded is discarded when the agreement after it
    (or the checkpoint's final record) says another rank failed; a failed last call of a
    checkpoint ``skip`` recorded as skipped is skipped."""
    liveness = run.liveness
    problems = liveness.problems if liveness is not None else []
    over = {
        (p.checkpoint, p.attempt): p.bound_s
        for p in problems
        if p.rank == rec.rank and p.step is Step.CHECKPOINT
    }
    wait = liveness.bounds.wait_bound_s(timeout_s) if liveness is not None else None
    agreed = {
        (int(e["index"]), int(e["attempt"])): bool(e.get("all_ok"))
        for e in rec.events
        if e.get("kind") == "checkpoint_agreement"
    }
    calls = [
        _Call(int(e["index"]), int(e["attempt"]), bool(e.get("ok")), e.get("error"),
              float(e["started_at"]), float(e["ended_at"]))
        for e in rec.events
        if e.get("kind") == "checkpoint_attempt" and "ended_at" in e
    ]  # fmt: skip
    called = {c.index for c in calls}
    calls += [
        _Call(c.index, 1, c.ok, c.error, c.started_at, c.ended_at)
        for c in rec.checkpoints
        if c.index not in called and c.started_at is not None and c.ended_at is not None
    ]
    final = {c.index: c for c in rec.checkpoints}
    last = {c.index: max(d.attempt for d in calls if d.index == c.index) for c in calls}
    out = []
    for c in sorted(calls):
        done = final.get(c.index) if c.attempt == last[c.index] else None
        outcome, cause = (Outcome.COMPLETED if c.ok else Outcome.FAILED), c.error
        if c.ok and (agreed.get((c.index, c.attempt)) is False or (done and not done.ok)):
            outcome, cause = Outcome.DISCARDED, done.error if done else None
        elif not c.ok and done is not None and done.skipped:
            outcome = Outcome.SKIPPED
        key = (c.index, c.attempt)
        seconds = c.ended_at - c.started_at
        out.append(
            Attempt(c.index, c.attempt, outcome, rel(c.started_at), seconds, timeout_s, cause,
                    over.get(key, wait), key in over)
        )  # fmt: skip
    return tuple(out)


def _faults(
    run: PhaseRun, rec: RankRecord, rel: Callable[[float], float], events: list[dict[str, Any]]
) -> tuple[Fault, ...]:
    out: list[Fault] = []
    for e in rec.events:
        kind = e.get("kind")
        if kind == "fault" and "at" in e:
            at = rel(float(e["at"]))
            out.append(Fault(FaultSource.RANK, str(e["action"]), at, step=e.get("at_step")))
        elif kind == CHILD_FAULT_RECORD and "at" in e:
            at = rel(float(e["at"]))
            out.append(Fault(FaultSource.CHILDREN, str(e["target"]), at, step=e.get("at_step")))
        elif kind == "lag" and "began_at" in e and "at" in e:
            began, ended = rel(float(e["began_at"])), rel(float(e["at"]))
            out.append(Fault(FaultSource.LAG, "lag", began, ended, peer=e.get("waited_for")))
    store = run.phase.store_faults
    for e in events:
        if e.get("kind") not in ("fired", "held") or "t" not in e:
            continue
        action = str(e.get("action"))
        if action == "await" and store:
            action = f"store {store[0].action}"
        elif isinstance(e.get("proxy"), Mapping) and e["proxy"].get("type"):
            action = str(e["proxy"]["type"])
        point = (str(e.get("phase")), int(e.get("n") or 1))
        out.append(Fault(FaultSource.ROUND, action, rel(float(e["t"])), point=point))
    return tuple(sorted(out, key=lambda f: f.at_s))


def _exit(
    run: PhaseRun, rec: RankRecord, result: RankOutcome | None, rel: Callable[[float], float]
) -> Exit:
    error = rec.error
    stamps = _times(rec, [])
    at = (
        rel(float(error["at"]))
        if error and "at" in error
        else (rel(max(stamps)) if stamps else None)
    )
    if result is None:
        return Exit(ExitKind.UNKNOWN, at)
    code = result.exitcode
    scheduled = result.self_signal is not None
    if code == 0:
        return Exit(ExitKind.CLEAN, at)
    if run.result.timed_out and result.killed_by_harness:
        return Exit(ExitKind.CUT_SHORT if run.result.cut_short else ExitKind.DEADLINE, None)
    if code is None:
        return Exit(ExitKind.UNKNOWN, at)
    if result.killed_by_harness or (code == -signal.SIGTERM and not scheduled):
        return Exit(ExitKind.STOPPED, at)
    if code < 0:
        return Exit(ExitKind.SIGNAL, at, signal=signal_name(-code), scheduled=scheduled)
    said = result.error or (str(error["error"]) if error and error.get("error") else None)
    return Exit(ExitKind.ERROR, at, error=said, scheduled=scheduled)


def _restored(outcome: ScenarioOutcome, run: PhaseRun) -> tuple[int, int] | None:
    if run.spec.restore_from is None:
        return None
    for earlier in outcome.phases:
        if earlier.index >= run.index:
            break
        for facts in earlier.checkpoints.facts:
            if str(earlier.spec.checkpoint_path(facts.index)) == run.spec.restore_from:
                return earlier.index, facts.index
    return None


def _unfired(run: PhaseRun, events: Mapping[int, list[dict[str, Any]]]) -> tuple[object, ...]:
    ph = run.phase
    fired = {(rec.rank, e.get("kind"), e.get("at_step")) for rec in run.records for e in rec.events}
    points = {
        (rank, e.get("phase"))
        for rank, evs in events.items()
        for e in evs
        if e.get("kind") in ("fired", "held")
    }
    out: list[object] = [
        f for f in ph.rank_faults if not f.at_round and (f.rank, "fault", f.at_step) not in fired
    ]
    out += [f for f in ph.child_faults if (f.rank, CHILD_FAULT_RECORD, f.at_step) not in fired]
    if events:
        out += [
            f
            for f in ph.proxy_faults
            if f.at != "start" and (f.rank, parse_at(f.at)[0]) not in points
        ]
    return tuple(out)


def _batches(outcome: ScenarioOutcome, launches: list[LaunchHappened]) -> BatchViolation | None:
    verdict = outcome.verdict
    if verdict is None or verdict.ok:
        return None
    first = verdict.first_divergence
    at = None if first is None else _locate(outcome, launches, first.step, first.lane)
    return BatchViolation(
        verdict.contract,
        str(verdict.kind),
        None if first is None else first.step,
        None if first is None else first.lane,
        dict(verdict.lost_by_lane),
        dict(verdict.repeated_by_lane),
        at,
    )


def _locate(
    outcome: ScenarioOutcome, launches: list[LaunchHappened], step: int, lane: int
) -> tuple[int, int, float] | None:
    """The kept batch at global ``step`` of ``lane``: its launch, rank and time there."""
    seen = 0
    for part in outcome.kept:
        for rec in representatives(part.ranks, part.tp):
            for b in rec.batches:
                if b.lane != lane or (
                    part.keep_before_checkpoint is not None
                    and b.checkpoints_before >= part.keep_before_checkpoint
                ):
                    continue
                if seen == step:
                    return _when(launches, part.phase, rec.rank, rec, b.index)
                seen += 1
    return None


def _when(
    launches: list[LaunchHappened], launch: int | None, rank: int, rec: RankRecord, index: int
) -> tuple[int, int, float] | None:
    drawn = next((ln for ln in launches if ln.index == launch), None)
    lane = None if drawn is None else next((r for r in drawn.ranks if r.rank == rank), None)
    timed = [b for b in rec.batches if b.fetch_at is not None]
    position = next((n for n, b in enumerate(timed) if b.index == index), None)
    if drawn is None or lane is None or position is None or position >= len(lane.batches):
        return None
    return drawn.index, rank, lane.batches[position]


def interposer_events(run: PhaseRun, rank: int) -> list[dict[str, Any]]:
    """The store interposer's events of ``rank`` in ``run`` (none where it did not run)."""
    from zephon_chaos.faults.interposer import read_events

    return read_events(Path(run.spec.out_dir), rank)
