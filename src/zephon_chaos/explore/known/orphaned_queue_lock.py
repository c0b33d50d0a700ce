"""``killed-worker-orphans-task-queue-lock``: a process-runner worker killed while it waits
for a command keeps its task queue's read lock, recognised in the hung launch's stacks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from zephon_chaos.diagnostics.frames import ThreadStack, parse_stacks
from zephon_chaos.diagnostics.stacks import Who
from zephon_chaos.explore.known.defect import KnownDefect, run_of
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.runner.hangs import HangSignature
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, RankRecord

WATCHDOG_REDISPATCH = "_handle_dead_worker"
"""Where Zephon's process-runner watchdog re-dispatches a dead worker's commands."""
WORKER_MAIN = "_process_worker_main"
"""A process-runner worker's loop (``_internal/runners/process.py``)."""
LOCK_WAIT = "SemLock.__enter__"
"""A wait for a multiprocessing lock: in a worker, for its task queue's read lock."""


def _names(thread: ThreadStack) -> set[str]:
    """The thread's functions by their own names (py-spy qualifies them with the class)."""
    return {frame.func.split(".")[-1] for frame in thread.frames}


def _locked_out(thread: ThreadStack) -> bool:
    """A thread stuck for good by a killed worker: a worker waiting for its task queue's read
    lock, or the watchdog re-dispatching into the queue nobody can read."""
    names = _names(thread)
    in_worker = WORKER_MAIN in names and any(f.func == LOCK_WAIT for f in thread.frames)
    in_watchdog = any(
        f.func.split(".")[-1] == WATCHDOG_REDISPATCH and f.file.endswith("process.py")
        for f in thread.frames
    )
    return in_worker or in_watchdog


def _waits_for_queue_lock(thread: ThreadStack) -> bool:
    """A thread whose innermost frame waits for a multiprocessing lock, taken by a queue's
    ``get`` (its read lock; a worker that holds it reads the queue's pipe instead)."""
    if not thread.frames:
        return False
    first = thread.frames[0]
    at_lock = first.func.split(".")[-1] == "__enter__" and first.file.endswith("synchronize.py")
    in_get = any(
        f.func.split(".")[-1] == "get" and f.file.endswith("queues.py") for f in thread.frames
    )
    return at_lock and in_get


PIPELINE_WAITS = (("consumer", "buffering.py"), ("_shutdown_workers", "process.py"))
"""Where a rank's main thread waits on its pipeline: for the next batch (Zephon's buffered
iteration), or for its workers to stop (``close()``)."""


def _waits_on_its_pipeline(threads: Sequence[ThreadStack]) -> bool:
    """The rank's main thread (py-spy's ``MainThread``, faulthandler's current thread, where
    the signal was handled) waits in its pipeline, not in a checkpoint round or elsewhere."""
    return any(
        (t.name == "MainThread" or t.current)
        and any((f.func.split(".")[-1], Path(f.file).name) in PIPELINE_WAITS for f in t.frames)
        for t in threads
    )


def _lock_held_by_the_dead(stacks: Mapping[str, Sequence[ThreadStack]]) -> bool:
    """The proof: a rank waits on its pipeline while every one of its pipeline workers
    waits for a task queue's read lock. A live holder of a read lock waits on the queue's
    pipe (CPython ``Queue.get`` holds it across the read) or works on a command, so the
    holder is no live worker: a killed one, and the lock is held for good. A rank with a
    worker elsewhere (another stage reading, a replacement still importing torch), or busy
    elsewhere itself, proves nothing, and waits for the quiet period."""
    waiting: dict[int, list[bool]] = {}
    pipeline_bound: set[int] = set()
    for who, threads in stacks.items():
        if not isinstance(who, Who) or who.rank is None:
            continue
        if who.role == "rank" and _waits_on_its_pipeline(threads):
            pipeline_bound.add(who.rank)
        if who.role != "child":
            continue
        mains = [t for t in threads if WORKER_MAIN in _names(t)]
        if mains:  # a pipeline worker (not a resource tracker, nor one still starting)
            waiting.setdefault(who.rank, []).append(all(map(_waits_for_queue_lock, mains)))
    return any(all(waiting[rank]) for rank in pipeline_bound & waiting.keys())


def _killed_workers(records: Iterable[RankRecord]) -> bool:
    """The trigger: a rank's ``child-fault`` record lists a PID it signalled (the fault acted,
    not the schedule alone)."""
    return any(
        ev.get("kind") == CHILD_FAULT_RECORD and ev.get("killed")
        for rec in records
        for ev in rec.events
    )


def _orphaned_queue_lock(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A launch whose child fault killed workers hung, and its stacks show a replacement
    waiting for the task queue's read lock or the watchdog still re-dispatching."""
    if not problem.is_(Area.LAUNCH, ProblemKind.TIMEOUT):
        return False
    run = run_of(outcome, problem)
    if run is None or not run.phase.child_faults or not _killed_workers(run.records):
        return False
    return any(
        _locked_out(thread) for text in run.result.stacks.values() for thread in parse_stacks(text)
    )


ORPHANED_LOCK_HANG = HangSignature(
    triggered=lambda context: _killed_workers(context.records()),
    stuck=_locked_out,
    proof=_lock_held_by_the_dead,
)
"""The hang as the launch runs: workers were killed, and a thread is locked out for good;
proved, without the long quiet period, where every worker of a rank waits for the lock."""


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
    hang=ORPHANED_LOCK_HANG,
)
