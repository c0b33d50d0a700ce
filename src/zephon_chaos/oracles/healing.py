"""The promise after a healed link: the next checkpoint completes.

Zephon's store client discards itself after a failed operation "so the next checkpoint
reconnects" (zephon 0.2.0 ``_internal/kvstore.py``, ``TorchKVStore``). A link fault that ends
with its round (``ProxyFault.until`` ``round_end``: the rank removes it once the
``checkpoint()`` call it fired in has returned or raised, record ``link_healed``) tests that:
the next call every rank makes after the heal must return the same merged checkpoint on every
rank, covering every lane, else a :data:`~zephon_chaos.problem.ProblemKind.NO_RECOVERY_AFTER_HEAL`
problem. The faulted round itself is judged by ``oracles.faults`` as any other.

The next call is the same checkpoint's next attempt where a rank made one (a ``lockstep``
retry; ``skip`` records one attempt a checkpoint), else the next checkpoint's first. The
client reconnects only after an operation *failed*, and "the failed operation is not retried"
(the same docstring). So where none of the healed rank's store operations raised between the
fault and the heal (``link_healed``'s ``failure_seen``: a follower's ack, c10d's SET awaiting no
reply, returns over a link just gone, its call's last operation), the client still holds the
connection the fault ended: the first operation of its next call fails on it, and where that
call failed on the rank the promise is for the call after it. It is judged only where every
rank calls it on time and together:

* no rank fault and no lag in the launch (a late rank fails a round by Zephon's own budget);
* not under ``independent`` retry: each rank retries alone, so the ranks' next calls need not
  be one round;
* under ``none``, only after a faulted call that returned on every rank (a failed one ends the
  launch, by design);
* some rank made the call at all (the faulted call was the launch's last).

Otherwise the verdict says why it was not judged (:class:`Unjudged`), as evidence.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.workload.records import CHECKPOINT_BEGUN, LINK_HEALED_RECORD, RankRecord

Call = tuple[int, int]
"""A ``checkpoint()`` call: (checkpoint index, attempt from 1)."""


class HealOutcome(enum.StrEnum):
    RECOVERED = "recovered"
    """Every rank's next call returned the same full checkpoint."""
    UNJUDGED = "not judged"
    """The promise does not apply (:class:`Unjudged` says why)."""
    NOT_RECOVERED = "no recovery"
    """Some rank's next call failed, is missing, or returned another checkpoint."""


class Unjudged(enum.Enum):
    """Why a heal's next call is not held to the promise; the value is for people."""

    LATE_RANK = "a rank fault or lag makes a rank late: no promise for the next call"
    INDEPENDENT = "independent retry: each rank retries alone, so the next calls are no one round"
    ENDED = "retry none after a failed call: the launch ends with it, by design"
    NO_NEXT_CALL = "no rank called checkpoint() after the heal (the faulted call was the last)"
    DEAD_CONNECTION = (
        "no store operation of the rank failed before the heal, so its client kept the "
        "connection the fault ended and the next call failed on it (Zephon's client reconnects "
        "after a failed operation, which it does not retry); no call followed that one"
    )


@dataclass(frozen=True)
class Heal:
    """A rank removed its link fault after call ``call`` (``link_healed`` record)."""

    rank: int
    call: Call
    point: str
    """The round point that fired it (``shard#1``)."""
    action: str
    failure_seen: bool = True
    """Some store operation of the rank raised between the fault and the heal, so its client
    dropped the connection the fault ended (records without the field: assumed so)."""


@dataclass(frozen=True)
class CallResult:
    """One rank's result of one call: ok, the checkpoint's digest, its lanes where known."""

    ok: bool
    digest: str | None = None
    error: str | None = None
    lanes: tuple[int, ...] | None = None


@dataclass
class HealVerdict:
    outcome: HealOutcome
    evidence: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def found(self) -> list[Problem]:
        return list(self.problems)


def heals_of(records: Sequence[RankRecord]) -> list[Heal]:
    """Every heal the ranks recorded, in rank order."""
    return [
        Heal(
            rec.rank,
            (int(ev["index"]), int(ev["attempt"])),
            f"{ev['phase']}#{ev['n']}",
            str(ev.get("action", "")),
            bool(ev.get("failure_seen", True)),
        )
        for rec in records
        for ev in rec.events
        if ev.get("kind") == LINK_HEALED_RECORD
    ]


def calls_of(rec: RankRecord) -> dict[Call, CallResult]:
    """A rank's calls and their results: its attempt records where it retries (lockstep,
    independent, skip), else its one call per checkpoint (its ``checkpoint`` record). A
    completed checkpoint's record gives its lanes to the attempt that returned it."""
    attempts = [ev for ev in rec.events if ev.get("kind") == "checkpoint_attempt"]
    out: dict[Call, CallResult] = {
        (int(ev["index"]), int(ev["attempt"])): CallResult(
            bool(ev.get("ok")), ev.get("digest"), ev.get("error")
        )
        for ev in attempts
    }
    if not attempts:
        out = {(c.index, 1): CallResult(c.ok, c.digest, c.error) for c in rec.checkpoints}
    for c in rec.checkpoints:
        for call, result in out.items():
            if c.ok and call[0] == c.index and result.ok and result.digest == c.digest:
                out[call] = CallResult(True, c.digest, None, tuple(c.lanes_covered))
    return out


def began(rec: RankRecord) -> set[int]:
    """Checkpoints the rank began (``checkpoint_begun``), recorded or not."""
    return {int(ev["index"]) for ev in rec.events if ev.get("kind") == CHECKPOINT_BEGUN}


def next_call(records: Sequence[RankRecord], after: Call) -> Call | None:
    """The call every rank makes after ``after``: its checkpoint's next attempt where a rank
    made one, else the next checkpoint's first where a rank began it; else None."""
    index, attempt = after
    calls = [calls_of(rec) for rec in records]
    if any((index, attempt + 1) in made for made in calls):
        return index, attempt + 1
    if any(
        index + 1 in began(rec) or (index + 1, 1) in made
        for rec, made in zip(records, calls, strict=True)
    ):
        return index + 1, 1
    return None


def promised_call(records: Sequence[RankRecord], heal: Heal) -> Call | None:
    """The call ``heal`` is judged by: :func:`next_call` after it, or, where the healed rank's
    client saw no operation fail before the heal and that call failed on the rank (its first
    operation met the connection the fault ended), the call after that one; None for none."""
    following = next_call(records, heal.call)
    if following is None or heal.failure_seen:
        return following
    mine = next((calls_of(rec).get(following) for rec in records if rec.rank == heal.rank), None)
    if mine is None or mine.ok:
        return following
    return next_call(records, following)


def judge(
    records: Sequence[RankRecord],
    *,
    canonical_replicas: int,
    retry: str,
    late: bool = False,
) -> HealVerdict:
    """Hold every heal in ``records`` to the promise; ``retry``: the launch's policy
    (``workload.spec.RETRIES``); ``late``: the launch has a rank fault or a lag."""
    heals = heals_of(records)
    verdict = HealVerdict(HealOutcome.RECOVERED)
    if not heals:
        verdict.outcome = HealOutcome.UNJUDGED
        return verdict
    judged = 0
    for heal in heals:
        why = _unjudged(records, heal, retry, late)
        where = (
            f"rank {heal.rank}'s link healed after checkpoint {heal.call[0]} attempt "
            f"{heal.call[1]} (fault at {heal.point})"
        )
        if isinstance(why, Unjudged):
            verdict.evidence.append(f"{where}: not judged, {why.value}")
            continue
        judged += 1
        _hold(records, heal, why, canonical_replicas, where, verdict)
    if verdict.problems:
        verdict.outcome = HealOutcome.NOT_RECOVERED
    elif not judged:
        verdict.outcome = HealOutcome.UNJUDGED
    return verdict


def _unjudged(records: Sequence[RankRecord], heal: Heal, retry: str, late: bool) -> Unjudged | Call:
    """Why ``heal`` is not judged, or the next call it is judged by."""
    if late:
        return Unjudged.LATE_RANK
    if retry == "independent":
        return Unjudged.INDEPENDENT
    if retry == "none":
        faulted = [calls_of(rec).get(heal.call) for rec in records]
        if not all(r is not None and r.ok for r in faulted):
            return Unjudged.ENDED
    following = promised_call(records, heal)
    if following is not None:
        return following
    if next_call(records, heal.call) is not None:
        return Unjudged.DEAD_CONNECTION
    return Unjudged.NO_NEXT_CALL


def _hold(
    records: Sequence[RankRecord],
    heal: Heal,
    call: Call,
    c: int,
    where: str,
    verdict: HealVerdict,
) -> None:
    index, attempt = call
    name = f"checkpoint {index} attempt {attempt}"
    which = "next call"
    if call != next_call(records, heal.call):  # promised_call passed the next one over
        which = "call after the next (its client met the connection the fault ended in that)"
    results = {rec.rank: calls_of(rec).get(call) for rec in records}
    wrong: list[str] = []
    for rank, result in results.items():
        if result is None:
            wrong.append(f"rank {rank} recorded no result of it")
        elif not result.ok:
            wrong.append(f"rank {rank} failed: {(result.error or '')[:240]}")
        elif result.lanes is not None and list(result.lanes) != list(range(c)):
            wrong.append(f"rank {rank}'s checkpoint covers lanes {list(result.lanes)}, not {c}")
    digests = {r: res.digest for r, res in results.items() if res is not None and res.ok}
    if len(set(digests.values())) > 1:
        wrong.append(f"ranks returned different checkpoints: digests {digests}")
    if not wrong:
        digest = next(iter(digests.values()), None)
        verdict.evidence.append(
            f"{where}: every rank's {which}, {name}, returned checkpoint (digest {digest})"
        )
        return
    verdict.problems.append(
        Problem(
            Area.FAULT,
            ProblemKind.NO_RECOVERY_AFTER_HEAL,
            f"{where}, but the {which}, {name}, did not complete: {'; '.join(wrong)}",
            checkpoint=index,
            rank=_first_rank(results),
        )
    )


def _first_rank(results: dict[int, Any]) -> int | None:
    """The first rank whose result is wrong (missing or failed), else None."""
    return next((r for r, res in results.items() if res is None or not res.ok), None)
