"""``missed-round-poisons-next``: a round some rank never joined leaves the ranks'
``last_round_id``s apart, so the next round's merge refuses them; ``healed-link-poisons-retry``:
the same root cause met after a link fault that healed at its round's end (the leader's
announcement lost on the link, so no follower joined the round the leader keeps the id of)."""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect, run_of
from zephon_chaos.oracles.healing import CallResult
from zephon_chaos.oracles.policies import RoundOutcome
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome

MISMATCH = "last_round_id mismatch across shards"


def _missed_round(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """An on-time round refused by the leader's merge for differing ``last_round_id``s, right
    after a round that failed (one some rank never joined)."""
    if not problem.is_(Area.POLICY, ProblemKind.ON_TIME_FAILURE) or problem.checkpoint is None:
        return False
    index = problem.checkpoint
    run = run_of(outcome, problem)
    if run is None or run.policy is None:
        return False
    before = next((r for r in run.policy.rounds if r.index == index - 1), None)
    if before is None or (before.outcome is RoundOutcome.COMPLETED and before.agreed):
        return False
    errors = [c.error or "" for rec in run.records for c in rec.checkpoints if c.index == index]
    return any(MISMATCH in e for e in errors)


def _poisoned_retry(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A rank's retry of a checkpoint refused by the merge for differing ``last_round_id``s,
    after an attempt of the same checkpoint failed: a fault failed the round (in a faulted
    launch the fault oracle, not the policy oracle, names the rank's error), or a late peer
    never joined it and met the retry on time (``independent`` retry beside a lag: the policy
    oracle's on-time meeting, named by the leader's checkpoint)."""
    faulted = problem.is_(Area.FAULT, ProblemKind.NO_CAUSE)
    met = problem.is_(Area.POLICY, ProblemKind.ON_TIME_FAILURE) and problem.checkpoint is not None
    run = run_of(outcome, problem) if faulted or met else None
    if run is None:
        return False
    rank = problem.rank if faulted else 0
    for rec in run.records:
        if rec.rank != rank:
            continue
        attempts = [ev for ev in rec.events if ev.get("kind") == "checkpoint_attempt"]
        for c in rec.checkpoints:
            if MISMATCH not in (c.error or "") or (met and c.index != problem.checkpoint):
                continue
            refused = [
                ev["attempt"]
                for ev in attempts
                if ev.get("index") == c.index and MISMATCH in (ev.get("error") or "")
            ]
            first = min(refused, default=0)
            if any(
                ev.get("index") == c.index and ev.get("attempt", 0) < first and not ev.get("ok")
                for ev in attempts
            ):
                return True
    return False


def _missed_or_failed_round(outcome: ScenarioOutcome, problem: Problem) -> bool:
    return _missed_round(outcome, problem) or _poisoned_retry(outcome, problem)


MISSED_ROUND_POISONS_NEXT = KnownDefect(
    id="missed-round-poisons-next",
    summary=(
        "after a round a follower never joined (it called checkpoint() once the round had "
        "failed), the next checkpoint fails on every rank although all call it on time; the "
        "one after completes"
    ),
    evidence=(
        "zephon 0.2.0 _internal/coordination.py RoundCoordinator.aggregate sets "
        "last_round_id as soon as a caller has a round id (the leader at once); with a KV "
        "store the failure notice sits at the result key (_failure_location returns "
        "_result_location), so _read_open_round_id skips the failed round and a late follower "
        "joins none; each next shard carries its own last_round_id and engine.py "
        "Engine._merge_state_dicts refuses 'last_round_id mismatch across shards'. The same "
        "defect is reached with no rank late: when the leader's own shard write raises, _lead "
        "(coordination.py 576-583) publishes a failure notice to the round's outcome key but "
        "keeps last_round_id (set at 527), followers that read the announcement after it join "
        "no round (462-465), and the lockstep retry is refused by engine.py "
        "Engine._merge_state_dicts (1988-1990, 2001-2005). Standalone: "
        "tests/zephon/repro/missed_round_poisons_next.py, "
        "tests/zephon/repro/failed_attempt_poisons_retry.py"
    ),
    explains=_missed_or_failed_round,
)


def _healed_link(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """No recovery after a heal (the heal oracle's problem) in a launch where a link fault
    healed after a call that failed on some rank (the trigger: the fault's round failed, then
    the link came back), and the call the oracle judged (``promised_call``: the next, or the
    one after where the healed rank's first operation of the next met the connection its fault
    ended) refused by the merge for differing ``last_round_id``s (the symptom)."""
    from zephon_chaos.oracles.healing import calls_of, heals_of, promised_call

    run = (
        run_of(outcome, problem)
        if problem.is_(Area.FAULT, ProblemKind.NO_RECOVERY_AFTER_HEAL)
        else None
    )
    if run is None:
        return False
    calls = [calls_of(rec) for rec in run.records]
    for heal in heals_of(run.records):
        faulted = [made.get(heal.call) for made in calls]
        if all(r is not None and r.ok for r in faulted):
            continue  # the fault's round completed: nothing of it was missed
        following = promised_call(run.records, heal)
        if following is None or following[0] != problem.checkpoint:
            continue
        errors = [(made.get(following) or CallResult(True)).error or "" for made in calls]
        if any(MISMATCH in e for e in errors):
            return True
    return False


HEALED_LINK_POISONS_RETRY = KnownDefect(
    id="healed-link-poisons-retry",
    summary=(
        "after the leader's store link went down at its announcement of a round and came back "
        "once its checkpoint() call had failed, the next checkpoint call (a lockstep retry, "
        "or the next checkpoint under skip) fails on every rank with 'last_round_id mismatch "
        "across shards', although the link is whole and every rank calls it on time"
    ),
    evidence=(
        "zephon 0.2.0 _internal/kvstore.py TorchKVStore.set sends c10d's SET with no reply "
        "(torch's TCPStore::set), so over a link cut at that moment the announcement is lost "
        "while the call returns; _internal/coordination.py RoundCoordinator."
        "_publish_new_round_id (435-439) then sets last_round_id (438), and aggregate (527) "
        "again, before any follower has seen the round; the leader's next store operation "
        "fails (TorchKVStore._call discards the client, 212-225), _lead publishes the failure "
        "and re-raises (576-583) keeping last_round_id; the followers' _open_round_id "
        "(471-475) times out 'waiting for round id' with last_round_id None. The retry's "
        "shards carry the lost round's id on the leader and None on the followers, and "
        "engine.py Engine._merge_state_dicts refuses them (1988-1990, 2001-2005): the "
        "mechanism of missed-round-poisons-next. A follower's link gone at its ack (a SET "
        "too, the last write of its call, which returns) and healed reaches it one call later: "
        "the client kept the dead connection, so the next call fails at its first operation "
        "(kvstore.py 149-150: not retried), a round that follower never joined, and the call "
        "after is refused the same way. Standalone: "
        "tests/zephon/repro/healed_link_poisons_retry.py"
    ),
    explains=_healed_link,
)
