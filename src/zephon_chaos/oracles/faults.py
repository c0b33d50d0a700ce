"""Fault-outcome oracles: what a faulted checkpoint round may end in, and the evidence.

For the checkpoint a fault hits, exactly one of these is acceptable:

* ``completed`` (i): every rank returned the same merged checkpoint, covering every lane,
  at the same logical position as the unfaulted run (:func:`position_digest`);
* ``failed`` (ii): every rank failed, each with an error naming the cause, each attempt
  within :func:`failure_bound_s` of ``aggregate_timeout_s`` (a rank the fault killed shows
  the signal in its wait status; a rank torchrun ended after a peer failed shows that);
* ``split`` (iii): some ranks returned while others failed (a lost acknowledgement), by
  design; ``split_resolved``: a lockstep retry then gave every rank the same checkpoint.

Anything else is a ``finding``: a hang (the deadline passed), ranks that returned different
checkpoints, an error that names no cause, a failure slower than the bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from zephon_chaos.launch.result import GroupResult
from zephon_chaos.oracles.global_batches import (
    PhaseRecords,
    Verdict,
    assemble,
    compare,
    lane_streams,
)
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.workload import persist
from zephon_chaos.workload.records import CheckpointEvent, RankRecord


class FaultOutcome(StrEnum):
    """What a faulted checkpoint round ended in (the module's docstring); the value is its
    name in reports and in the explorer's cells."""

    COMPLETED = "completed"
    FAILED = "failed"
    SPLIT = "split"
    SPLIT_RESOLVED = "split_resolved"
    FINDING = "finding"


# The outcomes by name, as the fault tests and the explorer's cells import them.
COMPLETED = FaultOutcome.COMPLETED
FAILED = FaultOutcome.FAILED
SPLIT = FaultOutcome.SPLIT
SPLIT_RESOLVED = FaultOutcome.SPLIT_RESOLVED
FINDING = FaultOutcome.FINDING

CAUSES: tuple[str, ...] = (
    "TCPStore",
    "Timed out",
    "failed on leader",
    "Can't reach the checkpoint",
    "interposer",
    "failed on another rank",
    "lockstep agreement failed",
    "a peer left the group before the checkpoint meeting",
)
"""Fragments of an error that names its cause: a store operation at an address, a wait that
timed out (and on what), the leader's failure, the lockstep agreement, or a peer lost before
the lockstep meeting (``rank.meetings.MEETING_LOST``: the rank never reached Zephon's round)."""
POSITION_FIELDS = ("progress", "lane_emitted", "epoch_boundaries", "world", "version")
"""The checkpoint fields that fix the loader's logical position. ``inflight``, ``lane_ws_state``
and ``lane_next_cid`` record how far prefetching had run, which varies run to run, and
``last_round_id`` is a timestamp; two equal positions resume to the same batches."""

# Bound of one failing checkpoint attempt, from measurement (docs/faults.md): a wait that
# times out ends at 1.0 T; the slowest failure is a store client that must reconnect to an
# unreachable store (c10d's connect retries: 1.5-2.9 T measured at T = 1-3 s on 2 loaded cores).
BOUND_FACTOR = 3.0
BOUND_SLACK_S = 3.0


Causes = Mapping[int, str | tuple[str, ...]] | Iterable[str]
"""Per rank, what its error must contain (a fragment or alternatives); or fragments for all."""


def failure_bound_s(timeout_s: float, attempts: int = 1) -> float:
    """How long ``attempts`` failing checkpoint attempts may take: (3 T + 3 s) each."""
    return attempts * (BOUND_FACTOR * timeout_s + BOUND_SLACK_S)


def overlap_s(intervals: Iterable[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``[start, end]`` that ``intervals`` (of several toxics: may overlap) cover."""
    covered, reach = 0.0, start
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, end)
        if b > a:
            covered += b - a
            reach = b
    return covered


def position_digest(ckpt: Mapping[str, Any]) -> str:
    """A digest of the checkpoint's logical position, equal for equal positions in any run."""
    return persist.digest({k: ckpt.get(k) for k in POSITION_FIELDS})


def position_of(path: Path | str, fmt: str) -> str:
    return position_digest(persist.load(path, fmt))


@dataclass
class RankRound:
    """One rank's part in the faulted checkpoint: its attempts, outcome and wait status."""

    rank: int
    final: CheckpointEvent | None
    attempts: list[dict[str, Any]]
    status: str
    exitcode: int | None
    error: dict[str, Any] | None = None
    """The rank's own ``error`` record when it failed outside a checkpoint (at its start)."""
    killed_by_harness: bool = False
    """The launcher ended it (its agent was gone, or the deadline passed)."""


@dataclass
class FaultVerdict:
    """The faulted checkpoint ``index``'s outcome, its evidence and its problems (a finding)."""

    outcome: FaultOutcome
    index: int
    evidence: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    durations: dict[int, float] = field(default_factory=dict)
    """Per rank, the longest checkpoint attempt (seconds, stop time excused)."""

    @property
    def ok(self) -> bool:
        return self.outcome != FaultOutcome.FINDING

    def found(self) -> list[Problem]:
        return list(self.problems)

    def add(self, kind: ProblemKind, text: str, rank: int | None = None) -> None:
        """A problem of the round, at its checkpoint."""
        self.problems.append(Problem(Area.FAULT, kind, text, checkpoint=self.index, rank=rank))

    def describe(self) -> str:
        lines = [f"checkpoint {self.index}: {self.outcome}"]
        lines += [f"  evidence: {e}" for e in self.evidence]
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def rank_rounds(
    records: list[RankRecord], result: GroupResult | None, index: int
) -> list[RankRound]:
    rounds = []
    for rec in records:
        final = next((c for c in rec.checkpoints if c.index == index), None)
        attempts = [
            ev
            for ev in rec.events
            if ev.get("kind") == "checkpoint_attempt" and ev.get("index") == index
        ]
        outcome = _rank_outcome(result, rec.rank)
        error = rec.error
        stopped = bool(outcome and outcome.killed_by_harness)
        if final is None and error is not None and not rec.checkpoints and not stopped:
            # Failed before its first checkpoint (an unreachable store fails the pipeline at
            # its first batch): that error is this rank's part in the round. Not a rank its
            # group's teardown ended (in process a thread records the stop as its error;
            # torchrun's SIGTERM leaves no record): that one never took part.
            final = CheckpointEvent(
                index=index,
                after_batches=0,
                ok=False,
                error=error.get("error"),
                duration_s=float(error.get("since_start_s", 0.0)),
            )
        rounds.append(
            RankRound(
                rec.rank,
                final,
                attempts,
                outcome.status if outcome else "unknown",
                outcome.exitcode if outcome else None,
                error,
                bool(outcome and outcome.killed_by_harness),
            )
        )
    return rounds


def _rank_outcome(result: GroupResult | None, rank: int) -> Any:
    if result is None:
        return None
    try:
        return result.rank(rank)
    except KeyError:
        return None


def judge(
    records: list[RankRecord],
    result: GroupResult | None,
    *,
    index: int,
    canonical_replicas: int,
    timeout_s: float,
    causes: Causes = CAUSES,
    faulted: Mapping[int, str] | None = None,
    excused_s: Mapping[int, float] | None = None,
    expected_position: str | None = None,
    position: str | None = None,
    held: Mapping[int, Sequence[tuple[float, float]]] | None = None,
) -> FaultVerdict:
    """The outcome of checkpoint ``index`` under a fault, with evidence, or a finding.

    ``causes``: per rank, a fragment (or alternatives) its error must contain (or fragments
    any error may contain); ``faulted``: ranks the fault ended, and the words their wait
    status must show; ``excused_s``: time a rank spent stopped (not counted against the bound);
    ``expected_position``/``position``: position digests of the unfaulted run's checkpoint
    and of this one (from rank 0's persisted file); ``held``: per rank, when its link held
    data back (a latency toxic's delays, monotonic clock): the part of an attempt they
    overlap is the network's time, not Zephon's, and is not counted against the bound.
    """
    verdict = FaultVerdict(FaultOutcome.FINDING, index)
    if result is not None and result.timed_out:
        _hang(result, timeout_s, verdict)
        return verdict
    rounds = rank_rounds(records, result, index)
    ok, failed, gone = _parts(
        rounds, dict(faulted or {}), dict(excused_s or {}), dict(held or {}), verdict
    )
    for r in failed:
        _check_cause(r, causes, verdict)
        _check_bound(r, timeout_s, verdict)
    for r in gone:
        _tell_gone(r, index, verdict)
    first_split = _first_split(rounds)
    if first_split:
        verdict.evidence.append(first_split)
    if ok and not failed and not gone:
        _completed(ok, canonical_replicas, expected_position, position, verdict)
        outcome = FaultOutcome.SPLIT_RESOLVED if first_split else FaultOutcome.COMPLETED
    elif ok and (failed or gone):
        outcome = FaultOutcome.SPLIT
        verdict.evidence.append(
            f"split: ranks {sorted(r.rank for r in ok)} returned checkpoint {index}, ranks "
            f"{sorted(r.rank for r in failed + gone)} failed"
        )
    elif failed or gone:
        outcome = FaultOutcome.FAILED
        for r in failed:
            verdict.evidence.append(f"rank {r.rank} failed: {(r.final.error or '')[:240]}")  # type: ignore[union-attr]
    else:
        outcome = FaultOutcome.FINDING
        verdict.add(
            ProblemKind.NO_RECORD, f"no rank recorded checkpoint {index}: {_statuses(rounds)}"
        )
    verdict.outcome = FaultOutcome.FINDING if verdict.problems else outcome
    return verdict


def _hang(result: GroupResult, timeout_s: float, verdict: FaultVerdict) -> None:
    """The group passed its deadline: a hang, where its ranks were stuck as evidence."""
    stuck = "; ".join(f"{k}: {v}" for k, v in result.stuck_frames().items())
    verdict.add(
        ProblemKind.HANG,
        f"hang: the group passed its deadline after {result.duration_s:.1f}s "
        f"(aggregate_timeout_s={timeout_s}); stuck at: {stuck or 'no stacks captured'}"
    )


def _parts(
    rounds: list[RankRound],
    faulted: Mapping[int, str],
    excused: Mapping[int, float],
    held: Mapping[int, Sequence[tuple[float, float]]],
    verdict: FaultVerdict,
) -> tuple[list[RankRound], list[RankRound], list[RankRound]]:
    """The ranks that returned the checkpoint, those that failed it and those that left no
    record of it (a rank the fault ended and that left none is in neither), each rank's
    longest attempt timed on the way (:func:`_time_attempts`)."""
    ok: list[RankRound] = []
    failed: list[RankRound] = []
    gone: list[RankRound] = []
    for r in rounds:
        _time_attempts(r, held.get(r.rank, ()), excused.get(r.rank, 0.0), verdict)
        if r.rank in faulted:
            _check_faulted(r, faulted[r.rank], verdict)
            if r.final is not None and r.final.ok:
                ok.append(r)
            elif r.final is not None:
                failed.append(r)
            continue
        if r.final is None:
            gone.append(r)
        elif r.final.ok:
            ok.append(r)
        else:
            failed.append(r)
    return ok, failed, gone


def _time_attempts(
    r: RankRound, held: Sequence[tuple[float, float]], excused_s: float, verdict: FaultVerdict
) -> None:
    """The rank's longest attempt, less the time its link held data back (``held``) and the
    time it was stopped (``excused_s``), into ``verdict.durations``."""
    timed = [a for a in r.attempts if "ended_at" in a]
    spans = [a["ended_at"] - a["started_at"] for a in timed]
    delays = [overlap_s(held, a["started_at"], a["ended_at"]) for a in timed]
    own = [span - delay for span, delay in zip(spans, delays, strict=True)]
    longest = max(
        own + ([r.final.duration_s] if r.final is not None and not r.attempts else [])
        or [0.0]
    )
    verdict.durations[r.rank] = max(0.0, longest - excused_s)
    if any(d > 0 for d in delays):
        i = max(range(len(own)), key=own.__getitem__)
        verdict.evidence.append(
            f"rank {r.rank}'s link held its data back {delays[i]:.1f}s of its "
            f"{spans[i]:.1f}s attempt (a toxic's delays): not counted against the bound"
        )


def _check_bound(r: RankRound, timeout_s: float, verdict: FaultVerdict) -> None:
    bound = failure_bound_s(timeout_s)
    if verdict.durations[r.rank] > bound:
        verdict.add(
            ProblemKind.SLOW_FAILURE,
            f"rank {r.rank} took {verdict.durations[r.rank]:.1f}s to fail one attempt, over "
            f"the bound {bound:.1f}s (3 x aggregate_timeout_s {timeout_s} + 3 s)",
            r.rank,
        )


def _tell_gone(r: RankRound, index: int, verdict: FaultVerdict) -> None:
    """A rank that left no record of the checkpoint: a problem only if it ended well."""
    if r.killed_by_harness:
        verdict.evidence.append(
            f"rank {r.rank} was ended by the harness before recording checkpoint {index} "
            "(its torchrun agent was gone)"
        )
    elif r.exitcode == 0:
        verdict.add(
            ProblemKind.NO_RECORD,
            f"rank {r.rank} left no record of checkpoint {index} and ended {r.status}",
            r.rank,
        )
    elif r.exitcode is None:
        # No evidence either way: a finding needs a rank known to have ended well.
        verdict.evidence.append(f"rank {r.rank} left no record of checkpoint {index}; {r.status}")
    else:
        verdict.evidence.append(
            f"rank {r.rank} was ended before recording checkpoint {index}: {r.status}"
        )


def _completed(
    ok: list[RankRound],
    canonical_replicas: int,
    expected_position: str | None,
    position: str | None,
    verdict: FaultVerdict,
) -> None:
    """Every rank returned the checkpoint: it must be the same one, covering every lane, where
    the unfaulted run's stood."""
    index = verdict.index
    _check_consistent(ok, canonical_replicas, verdict)
    if expected_position is not None and position != expected_position:
        verdict.add(
            ProblemKind.MOVED,
            f"checkpoint {index} completed at another position than the unfaulted run's "
            f"(position digest {position} != {expected_position})"
        )
    attempts = max(len(r.attempts) or 1 for r in ok)
    digest = ok[0].final.digest if ok[0].final else None
    verdict.evidence.append(
        f"every rank returned checkpoint {index} (digest {digest}, {attempts} attempt(s))"
    )


def _first_split(rounds: list[RankRound]) -> str | None:
    """The first attempt on which ranks disagreed (some returned, some failed), in words."""
    by_attempt: dict[int, dict[int, bool]] = {}
    for r in rounds:
        for a in r.attempts:
            by_attempt.setdefault(int(a["attempt"]), {})[r.rank] = bool(a.get("ok"))
    for attempt in sorted(by_attempt):
        seen = by_attempt[attempt]
        if len(set(seen.values())) > 1:
            returned = sorted(k for k, v in seen.items() if v)
            failed = sorted(k for k, v in seen.items() if not v)
            return f"attempt {attempt} split: ranks {returned} returned, ranks {failed} failed"
    return None


def _check_faulted(r: RankRound, words: str, verdict: FaultVerdict) -> None:
    if words and words not in r.status:
        verdict.add(
            ProblemKind.NOT_ENDED,
            f"rank {r.rank} was to be ended by the fault ({words}), but its wait status is "
            f"{r.status!r}",
            r.rank,
        )
    else:
        verdict.evidence.append(f"rank {r.rank}: {r.status}")


def _check_cause(r: RankRound, causes: Causes, verdict: FaultVerdict) -> None:
    error = (r.final.error if r.final else "") or ""
    if not isinstance(causes, Mapping):
        wanted = list(causes)
    elif r.rank in causes:
        given = causes[r.rank]
        wanted = [given] if isinstance(given, str) else list(given)
    else:
        wanted = list(CAUSES)
    if not any(fragment in error for fragment in wanted):
        verdict.add(
            ProblemKind.NO_CAUSE,
            f"rank {r.rank} failed with an error that names none of {wanted}: {error[:300]!r}",
            r.rank,
        )


def _check_consistent(ok: list[RankRound], c: int, verdict: FaultVerdict) -> None:
    digests = {r.rank: r.final.digest for r in ok if r.final is not None}
    if len(set(digests.values())) > 1:
        verdict.add(
            ProblemKind.INCONSISTENT, f"ranks returned different checkpoints: digests {digests}"
        )
    for r in ok:
        covered = r.final.lanes_covered if r.final else []
        if covered != list(range(c)):
            verdict.add(
                ProblemKind.COVERAGE,
                f"rank {r.rank}'s checkpoint covers lanes {covered}, not {c}",
                r.rank,
            )


def _statuses(rounds: list[RankRound]) -> str:
    return ", ".join(f"rank {r.rank} {r.status}" for r in rounds)


def previous_intact(
    records: list[RankRecord], checkpoint_path: Path, index: int, fmt: str
) -> list[str]:
    """Problems unless checkpoint ``index`` is on disk with the digest every rank recorded."""
    recorded = {
        rec.rank: c.digest for rec in records for c in rec.checkpoints if c.index == index and c.ok
    }
    if not recorded:
        return [f"no rank recorded a completed checkpoint {index}"]
    if len(set(recorded.values())) > 1:
        return [f"checkpoint {index} differs between ranks: {recorded}"]
    try:
        on_disk = persist.digest(persist.load(checkpoint_path, fmt))
    except persist.CheckpointFileError as exc:
        return [str(exc)]
    expected = next(iter(recorded.values()))
    if on_disk != expected:
        return [
            f"checkpoint {index} at {checkpoint_path} changed after the fault: digest {on_disk}, "
            f"recorded {expected}"
        ]
    return []


def stitched_identity(
    reference: list[RankRecord], parts: list[PhaseRecords], batches_per_lane: int
) -> Verdict:
    """Global-batch identity of launches stitched at their restores (a crash, a restart).

    ``parts``: each launch with the batches it kept (those before the checkpoint the next one
    restored); ``batches_per_lane``: how many batches each lane delivered in all. The
    reference is an uninterrupted run of at least that many steps.
    """
    ref = lane_streams(reference)
    got = assemble(parts)
    expected = {lane: batches_per_lane for lane in set(ref) | set(got)}
    short = sorted(lane for lane, batches in ref.items() if len(batches) < batches_per_lane)
    verdict = compare(ref, got, expected, exact=True)
    if short:
        verdict.ok = False
        verdict.problems.append(
            Problem(
                Area.BATCHES_IDENTICAL,
                ProblemKind.LANE_COUNT,
                f"the reference ran too few steps for lanes {short}: run it {batches_per_lane} "
                "steps",
            )
        )
    return verdict
