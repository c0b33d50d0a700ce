"""What a launch's checkpoint policy promises, judged from its records.

* Any policy: a checkpoint every rank reported as successful resumes to the documented
  batches (the runner restores it and the batch oracle compares); a failed one is never
  restored from (``runner.surviving_checkpoint``).
* ``skip``: a failed checkpoint is recorded and the ranks train on: every rank records every
  scheduled checkpoint (the collective calls stay aligned), rank 0 persists exactly the ones
  every rank got, and the next successful one is what the next launch restores.
* Arrival (``sync: free`` above all): Zephon's ``aggregate_timeout_s`` is a budget per call,
  started at each rank's own call (``RoundCoordinator.aggregate``: ``deadline =
  time.monotonic() + self._timeout_s``), so a round whose ranks called ``checkpoint()`` more
  than the budget apart fails by design. A failed round is judged by the recorded monotonic
  start of each rank's first call: ranks that far apart, documented (``LATE``); ranks on time
  with a scheduled fault in the launch, the fault oracles' to judge (``FAULTED``); ranks on
  time and no fault, a finding (``ON_TIME_FAILURE``).
* ``independent`` retry: a rank retries alone at once, so a late rank's call meets its
  peers' retries, not their first calls. Each such meeting (one call of every rank, each
  beginning within the budget of the leader's and inside it, none with another round open)
  that failed unfaulted is ``ON_TIME_FAILURE`` too: ranks on time got nothing
  (:func:`missed_meetings`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from zephon_chaos.problem import Area, Problem, ProblemKind, ProblemsVerdict
from zephon_chaos.workload.records import CHECKPOINT_BEGUN, RankRecord

LATE_SLACK_S = 0.5
"""How much earlier than the budget a late arrival still counts as late. After the last shard
the round still closes, merges, publishes and collects acknowledgements within the first
caller's budget: a few store calls on loopback (a whole successful 2-rank checkpoint took
0.18-0.21 s on 2 loaded cores in tests/zephon/test_policies.py), so a rank arriving within
half a second of the budget's end may fail the round by the same documented budget."""


class RoundOutcome(str, Enum):
    """How a checkpoint's first round ended, and whether that is what Zephon documents."""

    COMPLETED = "completed"
    LATE = "failed: ranks called checkpoint() further apart than aggregate_timeout_s"
    ABSENT = "failed: a rank never called checkpoint()"
    FAULTED = "failed under a scheduled fault (the fault oracles judge it)"
    TAKEN = (
        "failed: a rank's earlier call (a lone retry) joined the leader's round of this "
        "checkpoint, so its own call of it met none"
    )
    ON_TIME_FAILURE = "failed although every rank called within aggregate_timeout_s"


class PolicyProblemKind(str, Enum):
    ON_TIME_FAILURE = "on-time-failure"
    MISALIGNED = "misaligned-checkpoints"
    PERSISTED_FAILED = "persisted-failed-checkpoint"
    MISSING_FILE = "missing-checkpoint-file"


@dataclass(frozen=True)
class RoundJudgement:
    index: int
    outcome: RoundOutcome
    starts: dict[int, float]
    """Per rank, the monotonic start of its first checkpoint() call of this checkpoint."""
    failed_ranks: tuple[int, ...] = ()
    agreed: bool = True
    """Every rank's final record of this checkpoint is a success."""

    @property
    def spread_s(self) -> float | None:
        """How far apart the ranks' calls began (None: fewer than two starts recorded)."""
        if len(self.starts) < 2:
            return None
        return max(self.starts.values()) - min(self.starts.values())


@dataclass(frozen=True)
class PolicyProblem:
    kind: PolicyProblemKind
    phase: int
    checkpoint: int
    detail: str = ""

    def problem(self) -> Problem:
        kind = {
            PolicyProblemKind.ON_TIME_FAILURE: ProblemKind.ON_TIME_FAILURE,
            PolicyProblemKind.MISALIGNED: ProblemKind.MISALIGNED,
            PolicyProblemKind.PERSISTED_FAILED: ProblemKind.PERSISTED_FAILED,
            PolicyProblemKind.MISSING_FILE: ProblemKind.MISSING_FILE,
        }[self.kind]
        return Problem(Area.POLICY, kind, self.describe(), self.phase, self.checkpoint)

    def describe(self) -> str:
        where = f"phase {self.phase}: checkpoint {self.checkpoint}: "
        text = {
            PolicyProblemKind.ON_TIME_FAILURE: "failed although every rank called "
            "checkpoint() within aggregate_timeout_s of the others and no fault was scheduled",
            PolicyProblemKind.MISALIGNED: "under skip every rank records every checkpoint, "
            "but some did not",
            PolicyProblemKind.PERSISTED_FAILED: "under skip a checkpoint not every rank got "
            "must not be persisted, but it is on disk",
            PolicyProblemKind.MISSING_FILE: "every rank got it, but rank 0 persisted nothing",
        }[self.kind]
        return where + text + (f" ({self.detail})" if self.detail else "")


@dataclass
class PolicyVerdict(ProblemsVerdict[PolicyProblem]):
    phase: int
    retry: str
    timeout_s: float
    rounds: list[RoundJudgement] = field(default_factory=list)
    problems: list[PolicyProblem] = field(default_factory=list)

    @property
    def first_failed(self) -> RoundJudgement | None:
        return next((r for r in self.rounds if r.outcome is not RoundOutcome.COMPLETED), None)

    @property
    def failed_by_arrival(self) -> bool:
        """The launch's first failed round failed by Zephon's documented per-call budget."""
        first = self.first_failed
        return first is not None and first.outcome in (RoundOutcome.LATE, RoundOutcome.ABSENT)


@dataclass(frozen=True)
class Call:
    """One ``pipe.checkpoint()`` call of a rank (a ``checkpoint_attempt`` record)."""

    rank: int
    index: int
    attempt: int
    started_at: float
    ended_at: float
    ok: bool
    error: str = ""

    def describe(self) -> str:
        return f"rank {self.rank}'s attempt {self.attempt} of checkpoint {self.index}"


def calls(rec: RankRecord) -> list[Call]:
    """The rank's calls in the order made (those recorded with when they began and ended)."""
    out = [
        Call(
            rec.rank,
            int(ev["index"]),
            int(ev["attempt"]),
            float(ev["started_at"]),
            float(ev["ended_at"]),
            bool(ev.get("ok")),
            str(ev.get("error") or ""),
        )
        for ev in rec.events
        if ev.get("kind") == "checkpoint_attempt"
        and ev.get("started_at") is not None
        and ev.get("ended_at") is not None
    ]
    return sorted(out, key=lambda c: c.started_at)


def _alone(own: list[Call], call: Call, other: Call) -> bool:
    """``call`` met no round of its rank but ``other``'s: its rank's call before it had ended
    when ``other`` began."""
    before = [c for c in own if c.started_at < call.started_at]
    return not before or before[-1].ended_at <= other.started_at


NO_ROUND_JOINED = "waiting for round id"
"""Zephon's timeout of a follower that saw no open round (``RoundCoordinator._open_round_id``):
that call joined none."""


def _joined_already(own: list[Call], call: Call, leader: list[Call], lead: Call) -> bool:
    """``call`` and ``lead`` could meet in no other round although their calls before them
    overlap: the rank's call before ``call`` joined the leader's round before ``lead``
    (overlapped it, could have joined no earlier one, and did not time out seeing none), so it
    is no part of ``lead``'s round, and ``call`` cannot rejoin that one, as a follower skips an
    announced round its own shard is in (zephon 0.2.0 ``_internal/coordination.py``
    ``_read_open_round_id``, 452-458)."""
    mine = [c for c in own if c.started_at < call.started_at]
    theirs = [c for c in leader if c.started_at < lead.started_at]
    if not mine or not theirs:
        return False
    joined, opened = mine[-1], theirs[-1]
    return (
        _overlap(joined, opened)
        and _alone(leader, opened, joined)
        and NO_ROUND_JOINED not in joined.error
    )


def missed_meetings(records: Sequence[RankRecord], timeout_s: float) -> list[tuple[Call, ...]]:
    """Meetings of free-running ranks that failed although every rank was on time: per call of
    the leader (rank 0, who opens every round), the one call of each other rank that overlaps
    it, began within the budget (less :data:`LATE_SLACK_S`) of it, and could have joined no
    other round (each rank's call before had ended when the other's began, or the rank's had
    joined the leader's: :func:`_joined_already`); kept where a call
    of it failed. A meeting of every rank's first call of one checkpoint is that checkpoint's
    first round, judged as such."""
    made = {rec.rank: calls(rec) for rec in records}
    if 0 not in made or len(made) < 2:
        return []
    found: list[tuple[Call, ...]] = []
    for lead in made[0]:
        met = [lead]
        for rank, own in sorted(made.items()):
            if rank == 0:
                continue
            fits = [
                c
                for c in own
                if _overlap(c, lead)
                and abs(c.started_at - lead.started_at) < timeout_s - LATE_SLACK_S
                and (
                    (_alone(own, c, lead) and _alone(made[0], lead, c))
                    or _joined_already(own, c, made[0], lead)
                )
            ]
            if len(fits) != 1:
                break
            met.append(fits[0])
        else:
            first = len({c.index for c in met}) == 1 and all(c.attempt == 1 for c in met)
            if not first and not all(c.ok for c in met):
                found.append(tuple(met))
    return found


def first_starts(rec: RankRecord) -> dict[int, tuple[float, bool]]:
    """Per checkpoint index: (start, ok) of this rank's first checkpoint() call."""
    out: dict[int, tuple[float, bool]] = {}
    for ev in rec.events:
        if ev.get("kind") == "checkpoint_attempt" and ev.get("attempt") == 1:
            out[int(ev["index"])] = (float(ev["started_at"]), bool(ev.get("ok")))
    for c in rec.checkpoints:
        if c.index not in out and c.started_at is not None:
            out[c.index] = (c.started_at, c.ok)
    for ev in rec.events:  # a call that began and never returned: the rank came, and failed
        if ev.get("kind") == CHECKPOINT_BEGUN and int(ev["index"]) not in out:
            out[int(ev["index"])] = (float(ev["started_at"]), False)
    return out


def judge(
    records: Sequence[RankRecord],
    *,
    phase: int,
    timeout_s: float,
    retry: str = "none",
    faulted: bool = False,
    persisted: Callable[[int], bool] | None = None,
) -> PolicyVerdict:
    """Judge one launch: each checkpoint's first round, and what ``retry`` promises.

    ``faulted``: the launch schedules a fault that may fail a round (a link fault, a rank
    fault); ``persisted(index)``: whether rank 0's file of checkpoint ``index`` exists.
    """
    verdict = PolicyVerdict(phase, retry, timeout_s)
    starts = {rec.rank: first_starts(rec) for rec in records}
    finals = {rec.rank: {c.index: c.ok for c in rec.checkpoints} for rec in records}
    made = {rec.rank: calls(rec) for rec in records}
    indices = sorted({i for per in starts.values() for i in per})
    for index in indices:
        here = {r: s[index] for r, s in starts.items() if index in s}
        failed = tuple(sorted(r for r, (_, ok) in here.items() if not ok))
        agreed = all(finals[r].get(index) is True for r in finals)
        outcome = _outcome(here, len(records), failed, timeout_s, faulted)
        if outcome is RoundOutcome.ON_TIME_FAILURE and _taken(made, index, failed):
            outcome = RoundOutcome.TAKEN
        judged = RoundJudgement(
            index,
            outcome,
            {r: at for r, (at, _) in here.items()},
            failed,
            agreed,
        )
        verdict.rounds.append(judged)
        if judged.outcome is RoundOutcome.ON_TIME_FAILURE:
            verdict.problems.append(
                PolicyProblem(
                    PolicyProblemKind.ON_TIME_FAILURE,
                    phase,
                    index,
                    f"ranks {list(failed)} failed; calls began {judged.spread_s or 0.0:.2f}s "
                    f"apart, budget {timeout_s}s",
                )
            )
    if retry == "independent" and not faulted:
        for met in missed_meetings(records, timeout_s):
            spread = max(c.started_at for c in met) - min(c.started_at for c in met)
            verdict.problems.append(
                PolicyProblem(
                    PolicyProblemKind.ON_TIME_FAILURE,
                    phase,
                    met[0].index,
                    f"{', '.join(c.describe() for c in met)} met {spread:.2f}s apart, budget "
                    f"{timeout_s}s; failed: {[c.rank for c in met if not c.ok]}",
                )
            )
    if retry == "skip":
        verdict.problems += _skip_problems(records, verdict.rounds, phase, persisted)
    return verdict


def _taken(made: dict[int, list[Call]], index: int, failed: tuple[int, ...]) -> bool:
    """The leader's first call of ``index`` was joined by a failed rank's call before its own
    first call of ``index`` (a lone retry of an earlier checkpoint, ``independent``): the two
    overlapped with no other round of the leader's open, and that call did not time out
    seeing no round, so it took the round (a follower joins the newest open one,
    ``_read_open_round_id``) and the rank's own call of ``index`` could meet none. Where a
    late call lands no oracle predicts (docs/faults.md): the merged checkpoints such ranks
    got are judged by resuming them."""
    leader = made.get(0, [])
    opened = next((c for c in leader if c.index == index and c.attempt == 1), None)
    if opened is None:
        return False
    for rank in (r for r in failed if r != 0):
        own = made.get(rank, [])
        first = next((c for c in own if c.index == index and c.attempt == 1), None)
        before = [c for c in own if first is not None and c.started_at < first.started_at]
        if not before or before[-1].index == index:
            continue
        joined = before[-1]
        if (
            _overlap(joined, opened)
            and _no_other_round(own, joined, leader, opened)
            and NO_ROUND_JOINED not in joined.error
        ):
            return True
    return False


def _overlap(a: Call, b: Call) -> bool:
    return a.started_at < b.ended_at and b.started_at < a.ended_at


def _no_other_round(own: list[Call], call: Call, leader: list[Call], lead: Call) -> bool:
    """``call`` could join no round of the leader's but ``lead``'s: the leader's call before
    ``lead`` had ended when ``call`` began, or the rank's call before ``call`` was in that
    round already (overlapped it), and a follower does not rejoin a round its shard is in."""
    if _alone(leader, lead, call):
        return True
    mine = [c for c in own if c.started_at < call.started_at]
    theirs = [c for c in leader if c.started_at < lead.started_at]
    return bool(mine and theirs) and _overlap(mine[-1], theirs[-1])


def _outcome(
    here: dict[int, tuple[float, bool]],
    world: int,
    failed: tuple[int, ...],
    timeout_s: float,
    faulted: bool,
) -> RoundOutcome:
    if not failed and len(here) == world:
        return RoundOutcome.COMPLETED
    if len(here) < world:
        return RoundOutcome.ABSENT
    at = [t for t, _ in here.values()]
    if max(at) - min(at) >= timeout_s - LATE_SLACK_S:
        return RoundOutcome.LATE
    return RoundOutcome.FAULTED if faulted else RoundOutcome.ON_TIME_FAILURE


def _skip_problems(
    records: Sequence[RankRecord],
    rounds: list[RoundJudgement],
    phase: int,
    persisted: Callable[[int], bool] | None,
) -> list[PolicyProblem]:
    problems: list[PolicyProblem] = []
    ended = [rec for rec in records if rec.ended]
    seen = {rec.rank: {c.index for c in rec.checkpoints} for rec in ended}
    if len({frozenset(v) for v in seen.values()}) > 1:
        first = min(set().union(*seen.values()) - set.intersection(*seen.values()))
        problems.append(
            PolicyProblem(PolicyProblemKind.MISALIGNED, phase, first, f"recorded: {_sorted(seen)}")
        )
    if persisted is None:
        return problems
    for r in rounds:
        if r.agreed and not persisted(r.index):
            problems.append(PolicyProblem(PolicyProblemKind.MISSING_FILE, phase, r.index))
        elif not r.agreed and persisted(r.index):
            problems.append(PolicyProblem(PolicyProblemKind.PERSISTED_FAILED, phase, r.index))
    return problems


def judge_run(run: Any) -> PolicyVerdict:
    """Judge a runner's launch (``runner.PhaseRun``): its records, spec and scheduled faults."""
    from pathlib import Path

    spec, ph = run.spec, run.phase
    return judge(
        run.records,
        phase=run.index,
        timeout_s=spec.pipeline.aggregate_timeout_s,
        retry=spec.retry,
        faulted=bool(
            getattr(ph, "proxy_faults", ())
            or getattr(ph, "rank_faults", ())
            or getattr(ph, "store_faults", ())
        ),
        persisted=lambda index: Path(spec.checkpoint_path(index)).exists(),
    )


def _sorted(seen: dict[int, set[int]]) -> dict[int, list[int]]:
    return {rank: sorted(v) for rank, v in sorted(seen.items())}
