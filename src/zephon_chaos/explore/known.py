"""Known defects of Zephon: what the explorer found, with evidence, pinned by strict xfails.

Each defect explains some problem lines of an outcome. The suite's properties judge only
the problems no known defect explains (a known defect must not turn CI red), while a strict
xfail in ``tests/zephon/test_properties.py`` runs the defect's minimal scenario, so CI alerts
when Zephon fixes it. The explorer still reports them, as ``known.<id>`` findings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zephon_chaos.diagnostics.frames import ThreadStack, parse_stacks
from zephon_chaos.oracles.policies import RoundOutcome
from zephon_chaos.problem import Area, Kind, Problem
from zephon_chaos.runner import PhaseRun, ScenarioOutcome
from zephon_chaos.scenario_rules import FOLLOWER_POINTS, is_finite


@dataclass(frozen=True)
class KnownDefect:
    id: str
    summary: str
    evidence: str
    explains: Callable[[ScenarioOutcome, Problem], bool]


def _run(outcome: ScenarioOutcome, problem: Problem) -> PhaseRun | None:
    """The launch ``problem`` was found in."""
    return next((r for r in outcome.phases if r.index == problem.phase), None)


def _checkpoint_before_first_batch(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A restored launch checkpoints before its first batch and no rank warns mid-window."""
    if not problem.is_(Area.CHECKPOINT, Kind.NO_WARNING):
        return False
    run = _run(outcome, problem)
    if run is None or not run.spec.restore_from:
        return False
    index = problem.checkpoint
    events = [ev for rec in run.records for ev in rec.checkpoints if ev.index == index]
    return bool(events) and all(ev.after_batches == 0 for ev in events)


CHECKPOINT_AFTER_RESTORE = KnownDefect(
    id="checkpoint-after-restore-skips-round",
    summary=(
        "pipe.checkpoint() between pipe.restore() and the first batch is not collective: it "
        "returns the restored checkpoint unchanged, so a mid-window position does not warn and "
        "the result names the old world size"
    ),
    evidence=(
        "zephon 0.2.0 _internal/pipeline.py Pipeline.checkpoint: `if self._pending_restore is "
        "not None: return dict(self._pending_restore)` runs before any aggregation round, so "
        "Engine._check_mid_window_counts (engine.py, called from the merge) never sees the "
        "unequal lane counts; minimal scenario: G 1 -> 1, C=2, checkpoint 0+1 then a "
        "checkpoint at step 0 of the restored launch: no 'Checkpoint taken mid-window' warning "
        "on any rank, while the same position checkpointed after a batch warns"
    ),
    explains=_checkpoint_before_first_batch,
)


def _mtp_checkpoint(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """In ``mtp_mode`` no rank of the calling processes sees the mid-window warning."""
    return outcome.scenario.pipeline.mtp_mode and problem.is_(Area.CHECKPOINT, Kind.NO_WARNING)


MTP_WARNING_STAYS_IN_CHILD = KnownDefect(
    id="mtp-mid-window-warning-stays-in-child",
    summary=(
        "with mtp_mode=True, a mid-window pipe.checkpoint() warns only inside the MTP child "
        "process (text on its stderr): the process that called checkpoint() gets no warning, "
        "so warning filters, pytest's capture and logging.captureWarnings never see it"
    ),
    evidence=(
        "zephon 0.2.0 _internal/mtp.py _handle_ctrl_msg: on _CHECKPOINT the child runs "
        "engine.state_dict() (the round whose merge calls Engine._check_mid_window_counts) and "
        "sends back only the state; the RuntimeWarning is printed by the child, attributed to "
        "mtp.py:407. Minimal case: world_size=1, C=2, mtp_mode=True, one batch, then "
        "checkpoint(): lane_emitted {0: 1, 1: 0}, warnings caught in the caller: none; the "
        "same with mtp_mode=False warns in the caller. Found by the torchrun-tier property"
    ),
    explains=_mtp_checkpoint,
)


def _launch_failed(problem: Problem) -> bool:
    """A launch that failed: unexpectedly, before its scheduled rank fault fired, or not with
    the error a refusal names; or, in a faulted launch, a rank whose error is not the fault's
    cause, or a fault that never fired (the launch failed before its point)."""
    return (
        problem.area is Area.LAUNCH
        or problem.is_(Area.CRASH, Kind.EARLY_FAILURE)
        or problem.is_(Area.REFUSAL, Kind.WRONG_ERROR)
        or problem.is_(Area.FAULT, Kind.NO_CAUSE, Kind.NO_EVIDENCE)
    )


NO_NEXT_CID = "does not have next cid in the checkpoint"
"""Zephon's error (``Engine.load_state_dict``) for a lane whose next chunk id it did not find."""


def _restored_string_keys_with_undrawn_lane(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A launch failed on Zephon's missing-next-cid error while restoring a checkpoint whose
    keys had become strings (plain JSON persistence, or the json codec of a round over more
    than one rank) and in which some lane had not delivered a batch (its next chunk id 0).

    Where every rank failed so, the launch ended at its restore, before any batch: whatever
    else its checks expected of it (a checkpoint due before a rank fault, the fault's own
    death) is a consequence, and explained with it."""
    run = _run(outcome, problem)
    if run is None or not run.spec.restore_from:
        return False
    at_restore = [NO_NEXT_CID in (rank.error or "") for rank in run.result.ranks]
    ended_at_restore = bool(at_restore) and all(at_restore)
    if not (ended_at_restore or (_launch_failed(problem) and any(at_restore))):
        return False
    scenario = outcome.scenario
    for source in outcome.phases:
        for facts in source.checkpoints.facts:
            if str(source.spec.checkpoint_path(facts.index)) != run.spec.restore_from:
                continue
            string_keys = scenario.persist_format == "plain_json" or (
                scenario.pipeline.aggregate_serializer == "json" and source.phase.world_size > 1
            )
            lanes = range(scenario.canonical_replicas(source.index))
            return string_keys and any(facts.lane_counts.get(lane, 0) == 0 for lane in lanes)
    return False


STRING_KEY_ZERO_CID_RESTORE = KnownDefect(
    id="string-key-zero-cid-restore",
    summary=(
        "a checkpoint whose lane keys became strings (aggregate_serializer='json', or a recipe "
        "persisting it with json.dumps/json.loads) cannot be restored while some lane has not "
        "drawn its first chunk: restore() is followed by 'Lane N does not have next cid in "
        "the checkpoint'"
    ),
    evidence=(
        "zephon 0.2.0 _internal/engine.py Engine.load_state_dict: `saved_next = "
        "ckpt.lane_next_cid.get(str(lane)) or ckpt.lane_next_cid.get(int(lane))` then `if "
        "saved_next is None: raise RuntimeError(...does not have next cid in the "
        "checkpoint)`: a stored 0 under the string key is falsy, so the `or` falls through "
        "to the absent int key. The json codec's AggregationCodec._deserialize "
        "(_internal/checkpoint/_codec.py) is a bare json.loads, so the merged checkpoint of a "
        "round over 2+ ranks comes back string-keyed. The same `or` reads ckpt.progress and "
        "ckpt.lane_ws_state, whose values are never falsy (a {chunk_id, offset} dict; a "
        "work-source state that always holds lane_id). Standalone: "
        "tests/zephon/repro/string_key_zero_cid.py (C=4, checkpoint right after iter(): "
        "json codec on 2 ranks and plain JSON on 1 are refused; msgpack, pickle, and plain "
        "JSON after one batch a lane restore). Minimal scenario: G 2 -> 2, C=2, "
        "aggregate_serializer json, checkpoint at step 0"
    ),
    explains=_restored_string_keys_with_undrawn_lane,
)


def _over_bound(problem: Problem) -> bool:
    """A faulted round's attempt, or a wait, longer than its bound."""
    return problem.is_(Area.FAULT, Kind.SLOW_FAILURE) or problem.is_(
        Area.LIVENESS, Kind.UNBOUNDED_WAIT
    )


def _stalled_hosted_store(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A faulted round's call over its bound in a launch whose hosted store was stopped, and
    no longer than the stall plus that bound: the stall is what held it."""
    from zephon_chaos.faults.hosted_store import StoreFaultLaunch
    from zephon_chaos.oracles.faults import failure_bound_s

    run = _run(outcome, problem) if _over_bound(problem) else None
    fault = None if run is None else run.fault
    if not isinstance(fault, StoreFaultLaunch) or fault.fault.action != "sigstop":
        return False
    stalled, timeout_s = fault.stalled_s(), fault.timeout_s
    measured = list(fault.verdict.durations.values()) if fault.verdict else []
    bounds = [failure_bound_s(timeout_s)] * len(measured)
    for p in run.liveness.problems if run.liveness else []:
        measured.append(p.measured_s)
        bounds.append(p.bound_s)
    return stalled > 0 and all(s <= stalled + b for s, b in zip(measured, bounds, strict=True))


STALLED_HOSTED_STORE = KnownDefect(
    id="stalled-store-blocks-store-calls",
    summary=(
        "a store that stops answering (its process stopped, or a link that delivers nothing) "
        "keeps TorchKVStore calls blocked until it answers again, past any multiple of "
        "aggregate_timeout_s, so a round stalled at the store fails only after the stall"
    ),
    evidence=(
        "zephon 0.2.0 _internal/kvstore.py: KVStoreFactory documents that the timeout 'bounds "
        "the store's blocking operations, including connection setup', and TorchKVStore "
        "hands each call to c10d's TCPStore client, whose timeout does not bound a reply that "
        "never comes (a connect to a stopped server also succeeds: the kernel completes it). "
        "Standalone: tests/zephon/repro/stalled_store_process.py (T = 1 s, server SIGSTOPped "
        "8 s: get returns after 8.0 s, a fresh client's wait after 9.0 s, both only at the "
        "SIGCONT). Same root cause as the stalled-link finding (Toxiproxy timeout toxic, "
        "docs/faults.md Findings 1). Minimal scenario: G 2 -> 2, C=2, store_explicit, T = 2 s, "
        "the hosted store stopped 12 s at shard#1: both ranks fail after 12.1 s (bound 9 s)"
    ),
    explains=_stalled_hosted_store,
)


def _stalled_link(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A hang, or a wait over its bound, in a launch whose store link a ``timeout`` toxic
    stalled (the fault's evidence says it acted): the stall is what held it."""
    from zephon_chaos.faults.scenario_proxy import FaultedLaunch
    from zephon_chaos.scenario_rules import STALLING_TOXICS

    stalled = _over_bound(problem) or problem.is_(Area.FAULT, Kind.HANG)
    run = _run(outcome, problem) if stalled else None
    fault = None if run is None else run.fault
    if not isinstance(fault, FaultedLaunch) or not fault.evidence:
        return False
    return any(f.toxic in STALLING_TOXICS for f in fault.faults)


STALLED_STORE_LINK = KnownDefect(
    id="stalled-store-link",
    summary=(
        "a store link that stalls (an established connection that delivers nothing: the "
        "Toxiproxy timeout toxic) keeps TorchKVStore calls on it blocked past any multiple of "
        "aggregate_timeout_s, so ranks that wait for the stalled rank (a lockstep retry's "
        "agreement) hang to the launch deadline, and its round fails past the bound"
    ),
    evidence=(
        "zephon 0.2.0 _internal/kvstore.py: KVStoreFactory documents that the timeout bounds "
        "the store's blocking operations; TorchKVStore.wait/check/get/add/compare_set/delete "
        "hand each call to c10d's TCPStore client, whose timeout does not bound a reply that "
        "never comes. Measured still blocked after 8 s at T = 1-2 s "
        "(tests/zephon/test_faults_store.py::"
        "test_a_stalled_store_link_fails_a_store_call_within_the_bound, strict xfail); the "
        "standalone tests/zephon/repro/stalled_store_process.py shows the same root cause with "
        "the server stopped instead of the link. Generated launches with a timeout toxic run "
        "under a deadline of 3 T + 3 s + 30 s (faults.scenario_proxy.stall_deadline_s)"
    ),
    explains=_stalled_link,
)


LEADER = 0
"""Zephon's round leader: global rank 0, worker 0 (``Engine.state_dict``, engine.py 1874)."""
DEAD_STORE_DELETE_TIMEOUTS = 4.0
"""One store call of the leader's clean-up against a dead store, in ``T``: a new client whose
connect c10d retries within ``T`` (1.0-3.2 T measured by ``dead_store_ack_cleanup.py``)."""


def _dead_store_ack_cleanup(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """The leader's call over its bound in a launch whose hosted store was killed at a
    follower's acknowledgement, by no more than one dead-store delete per acknowledgement it
    can have read (every follower's but the held one's)."""
    from zephon_chaos.faults.hosted_store import StoreFaultLaunch
    from zephon_chaos.oracles.faults import failure_bound_s

    run = _run(outcome, problem) if _over_bound(problem) else None
    fault = None if run is None else run.fault
    if not isinstance(fault, StoreFaultLaunch) or problem.rank != LEADER:
        return False
    if fault.fault.action != "kill" or fault.point[0] not in FOLLOWER_POINTS:
        return False
    timeout_s = fault.timeout_s
    acks = max(0, run.phase.world_size - 2)
    allowed = failure_bound_s(timeout_s) + acks * DEAD_STORE_DELETE_TIMEOUTS * timeout_s
    durations = fault.verdict.durations if fault.verdict else {}
    measured = [durations[LEADER]] if LEADER in durations else []
    if run.liveness:
        measured += [p.measured_s for p in run.liveness.problems if p.rank == LEADER]
    return bool(measured) and all(s <= allowed for s in measured)


DEAD_STORE_ACK_CLEANUP = KnownDefect(
    id="dead-store-ack-cleanup",
    summary=(
        "when the store dies while the leader waits for acknowledgements, the leader's failing "
        "checkpoint() lasts about one connection timeout (1-3 aggregate_timeout_s) per "
        "acknowledgement it had read: its clean-up deletes each one on a new connection to "
        "the dead store, so the overrun grows with the world size"
    ),
    evidence=(
        "zephon 0.2.0 _internal/coordination.py RoundCoordinator._wait_for_acks (597-637): the "
        "finally (635-637) calls _delete_best_effort (380-384) for every acknowledgement read, "
        "also when the wait failed because the store did, with no budget; KVCoordinator._delete "
        "(1057-1061) is one store call per key; _internal/kvstore.py TorchKVStore._call "
        "(212-225) discards the client after any failure, so each delete builds a new TCPStore "
        "client (_client, 227-240) whose connect c10d retries within timeout=T. Standalone: "
        "tests/zephon/repro/dead_store_ack_cleanup.py (T = 1 s, store SIGKILLed after the "
        "leader read G-2 acknowledgements: the leader's call ends 1.2-1.8 s after the kill at "
        "G=3 and 13-15 s at G=9, one 1.0-3.0 s delete per acknowledgement). Found by the "
        "downstream profile: G 4 at TP 2, store_explicit, hosted store killed at ack#1, "
        "T = 2 s: rank 0 failed after 9.8 s (bound 9 s)"
    ),
    explains=_dead_store_ack_cleanup,
)


MISMATCH = "last_round_id mismatch across shards"


def _missed_round(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """An on-time round refused by the leader's merge for differing ``last_round_id``s, right
    after a round that failed (one some rank never joined)."""
    if not problem.is_(Area.POLICY, Kind.ON_TIME_FAILURE) or problem.checkpoint is None:
        return False
    index = problem.checkpoint
    run = _run(outcome, problem)
    if run is None or run.policy is None:
        return False
    before = next((r for r in run.policy.rounds if r.index == index - 1), None)
    if before is None or (before.outcome is RoundOutcome.COMPLETED and before.agreed):
        return False
    errors = [c.error or "" for rec in run.records for c in rec.checkpoints if c.index == index]
    return any(MISMATCH in e for e in errors)


def _poisoned_retry(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A rank's retry of a checkpoint refused by the merge for differing ``last_round_id``s,
    after an attempt of the same checkpoint failed (a fault failed the round): in a faulted
    launch the fault oracle, not the policy oracle, names the rank's error."""
    run = _run(outcome, problem) if problem.is_(Area.FAULT, Kind.NO_CAUSE) else None
    if run is None:
        return False
    rank = problem.rank
    for rec in run.records:
        if rec.rank != rank:
            continue
        attempts = [ev for ev in rec.events if ev.get("kind") == "checkpoint_attempt"]
        for c in rec.checkpoints:
            if MISMATCH not in (c.error or ""):
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


WATCHDOG_REDISPATCH = "_handle_dead_worker"
"""Where Zephon's process-runner watchdog re-dispatches a dead worker's commands."""
WORKER_MAIN = "_process_worker_main"
"""A process-runner worker's loop (``_internal/runners/process.py``)."""
LOCK_WAIT = "SemLock.__enter__"
"""A wait for a multiprocessing lock: in a worker, for its task queue's read lock."""


def _locked_out(thread: ThreadStack) -> bool:
    """A thread stuck for good by a killed worker: a worker waiting for its task queue's read
    lock, or the watchdog re-dispatching into the queue nobody can read."""
    names = {frame.func.split(".")[-1] for frame in thread.frames}
    in_worker = WORKER_MAIN in names and any(f.func == LOCK_WAIT for f in thread.frames)
    in_watchdog = any(
        f.func.split(".")[-1] == WATCHDOG_REDISPATCH and f.file.endswith("process.py")
        for f in thread.frames
    )
    return in_worker or in_watchdog


def _orphaned_queue_lock(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A launch whose child fault killed workers hung, and its stacks show a replacement
    waiting for the task queue's read lock or the watchdog still re-dispatching."""
    if not problem.is_(Area.LAUNCH, Kind.TIMEOUT):
        return False
    run = _run(outcome, problem)
    if run is None or not run.phase.child_faults:
        return False
    return any(
        _locked_out(thread) for text in run.result.stacks.values() for thread in parse_stacks(text)
    )


KILLED_WORKER_ORPHANS_QUEUE_LOCK = KnownDefect(
    id="killed-worker-orphans-task-queue-lock",
    summary=(
        "with runner='process', a worker killed while it waits for its next command (the "
        "consumer paused, or the workers ahead of it) keeps its task queue's read lock for "
        "good: no replacement reads a command again, the watchdog blocks re-dispatching under "
        "the runner's shutdown lock, and next() (once the buffers are drawn) and close() never "
        "return"
    ),
    evidence=(
        "zephon 0.2.0 _internal/runners/process.py: a worker waits with a blocking "
        "config.task_queue.get() (456) on a multiprocessing.Queue shared by the stage's "
        "workers (NamedQueue, runners/queue.py 59), whose get holds the queue's cross-process "
        "read lock while it waits (CPython multiprocessing/queues.py 102-103); "
        "_handle_dead_worker (1077-1287) replaces the process but not the queue, and "
        "re-dispatches every pending command per dead worker (1113-1114) with a blocking put "
        "(1274-1284) under _shutdown_lock (_watchdog_loop, 1021); _shutdown_workers takes "
        "that lock with no timeout (1838). Standalone: tests/zephon/repro/paused_worker_death.py "
        "(killed: one worker reading the task pipe, three waiting for its lock; all three "
        "replacements wait for the lock, none reads; docs/faults.md Findings 10)"
    ),
    explains=_orphaned_queue_lock,
)


MTP_CAPTURE_FAILED = "RuntimeError: MTP checkpoint failed in subprocess"
"""How Zephon words a failed checkpoint of the MTP child (``_internal/mtp.py`` 767)."""


def _mtp_end_of_data(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A launch of an ``mtp_mode`` pipeline over finite data failed because a rank's
    ``next()`` (its record's ``fetch_at``: the data's end) raised the MTP child's failed
    checkpoint: the implicit round at the end of its iteration, which no other rank joined."""
    if problem.area is not Area.LAUNCH or problem.kind != "RuntimeError":
        return False
    s = outcome.scenario
    if not s.pipeline.mtp_mode or not is_finite(s.data):
        return False
    run = _run(outcome, problem)
    if run is None:
        return False
    return any(
        (error := rec.error) is not None
        and error.get("fetch_at") is not None
        and str(error.get("error", "")).startswith(MTP_CAPTURE_FAILED)
        for rec in run.records
        if rec.rank == problem.rank
    )


MTP_END_OF_DATA_WAITS = KnownDefect(
    id="mtp-end-of-data-waits-for-every-rank",
    summary=(
        "with mtp_mode=True, a rank whose data ends first cannot learn it: its next() runs a "
        "checkpoint round of every rank before StopIteration, so ranks that stop together on "
        "uneven data (or meet before their next checkpoint) leave it waiting out "
        "aggregate_timeout_s, and it raises RuntimeError instead of ending"
    ),
    evidence=(
        "zephon 0.2.0 _internal/pipeline.py Pipeline._iter_mtp (1863-1877): on the child's "
        "completed iteration, with mtp_auto_checkpoint on (options.py 147, the default), it "
        "calls MTPPipeline.checkpoint before the generator returns; the child answers with "
        "engine.state_dict() (mtp.py 405-407), an aggregation round expecting every rank "
        "(engine.py 1875-1880); the failed round is raised as 'MTP checkpoint failed in "
        "subprocess' (mtp.py 765-767). The in-process path ends with no round. Standalone: "
        "tests/zephon/repro/mtp_end_of_data.py (2 ranks stopping together on uneven lanes: "
        "StopIteration at once without mtp_mode; with it, RuntimeError after T = 6 s)"
    ),
    explains=_mtp_end_of_data,
)


KNOWN_DEFECTS: tuple[KnownDefect, ...] = (
    CHECKPOINT_AFTER_RESTORE,
    MTP_WARNING_STAYS_IN_CHILD,
    STRING_KEY_ZERO_CID_RESTORE,
    STALLED_STORE_LINK,
    STALLED_HOSTED_STORE,
    DEAD_STORE_ACK_CLEANUP,
    MISSED_ROUND_POISONS_NEXT,
    KILLED_WORKER_ORPHANS_QUEUE_LOCK,
    MTP_END_OF_DATA_WAITS,
)


def explaining(outcome: ScenarioOutcome) -> list[KnownDefect]:
    """The known defects that explain at least one problem of ``outcome``."""
    return [d for d in KNOWN_DEFECTS if any(d.explains(outcome, p) for p in outcome.problems)]


def unexplained(outcome: ScenarioOutcome) -> list[Problem]:
    """Problem lines no known defect explains."""
    return [p for p in outcome.problems if not any(d.explains(outcome, p) for d in KNOWN_DEFECTS)]


def judged_ok(outcome: ScenarioOutcome) -> bool:
    """Passes once known defects are set aside: what the suite's properties assert (a
    failure the harness could not describe never passes)."""
    return (
        not unexplained(outcome)
        and not outcome.harness_problems
        and (outcome.verdict is None or outcome.verdict.ok)
    )
