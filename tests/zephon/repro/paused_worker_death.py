"""Standalone (torch, zephon and the standard library only): a worker process of a
``runner="process"`` pipeline killed while it waits for its next command leaves its stage's
task queue locked for good: no replacement ever reads a command, and ``close()`` (or, once
the buffered batches are drawn, ``next()``) never returns.

Run: ``python paused_worker_death.py CASE``, CASE ``paused`` or ``drawing``. One rank
(``runner="process"``, torchtitan-zephon's default, 4 fetch workers), ``ZEPHON_WATCHDOG_POLL_S``
as the caller sets it. The consumer draws 3 batches; in ``paused`` it then pauses for
``PAUSE_S`` (a trainer's evaluation or checkpoint save: the prefetch fills, the task queue
empties, and the workers wait in it for their next command); every worker is SIGKILLed (the
OOM killer, in a trainer); the script waits for as many new worker processes (a logical
event, bounded by ``RESPAWN_S``), in ``drawing`` drawing on as it waits; it draws 12 more
and closes the iterator, in a thread it waits ``CLOSE_S`` for.

Observed (zephon 0.2.0, 2 cores): ``drawing`` kills busy workers (all running), replaces
every one and closes in about 3-5 s. ``paused`` kills idle ones: one reading the task
queue's pipe, three waiting for its read lock. Three replacements start, and all three wait
for that lock (``/proc/PID/syscall``: futex; none reads the pipe); the watchdog blocks
putting the dead workers' commands back into the full queue, holding the runner's
``_shutdown_lock``; the closing thread waits for that lock. The 12 batches in between come
from the buffers.

Cause, in Zephon 0.2.0's source:

- a worker waits for its next command with a blocking ``config.task_queue.get()``
  (``_internal/runners/process.py`` 456) on a ``NamedQueue``, a ``multiprocessing.Queue``
  (``_internal/runners/queue.py`` 59) shared by the stage's workers, whose ``get`` holds the
  queue's cross-process read lock while it waits on the pipe (CPython
  ``multiprocessing/queues.py`` 102-103). A worker SIGKILLed there never releases it, and
  Zephon's watchdog replaces the process but not the queue or its lock
  (``_handle_dead_worker``, 1077-1287);
- ``_handle_dead_worker`` re-dispatches every pending command of the stage for each dead
  worker (``to_consider``, 1113-1114) with a blocking ``task_queue.put(cmd)`` (1274-1284,
  "these puts can't deadlock") into the bounded queue (``queue_capacity`` x parallelism,
  1716-1719), which nobody can read any more; it does so under ``self._shutdown_lock``
  (``_watchdog_loop``, 1021);
- ``_shutdown_workers`` (1837-1838) takes ``_shutdown_lock`` without a timeout, after
  ``close()`` (2342-2358) gave the watchdog one second to stop (``_stop_watchdog``, 987-993).

Prints one JSON line: ``{"case", "killed", "respawned", "drawn", "killed_waiting_in",
"replacements_waiting_in", "closed_s" (None: not closed within CLOSE_S), "watchdog",
"closing"}``: the system calls the killed workers and their replacements waited in, and the
innermost Zephon frames (``function:line``) of the watchdog thread and of the closing thread
when the close did not return. A close that did not return leaves threads that would hang
the interpreter's exit, so the script then kills its children and leaves with ``os._exit``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import warnings
from typing import Any

from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

CASES = ("paused", "drawing")
PAUSE_S = 3.0
"""The consumer's pause in ``paused``: the scenario itself (a trainer busy elsewhere), not a
wait for anything; the prefetch fills in well under a second here."""
RESPAWN_S = 20.0
"""How long the script waits for as many new workers as it killed."""
CLOSE_S = 60.0
"""How long it waits for the close: a healthy one took 5 s after the kill, and Zephon's own
shutdown bounds (drain, join, terminate) add up to about a minute for 4 workers."""
BEFORE, AFTER = 3, 12
WATCHDOG = "zephon-proc-runner-watchdog"


def build() -> Any:
    rows = {s: InMemoryShard([{"s": s, "i": i} for i in range(40)]) for s in range(40)}
    source = StaticMixtureWorkSource(
        datasets=[Dataset.from_dict("a", rows)],
        mixture=MixtureSpec({"a": 1.0}),
        chunk_size=16,
        seed=7,
        shuffle_within_shard=True,
    )
    return (
        Pipeline(source)
        .batch(microbatch_size=4)
        .options(
            world_size=1,
            global_rank=0,
            canonical_replicas=4,
            runner="process",
            max_workers=2,
            run_id="paused-worker-death",
        )
    )


def read_proc(path: str) -> bytes:
    """A /proc file's bytes; b"" when its thread or process ended after it was listed."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def children() -> list[int]:
    me = os.getpid()
    found: list[int] = []
    for task in os.listdir(f"/proc/{me}/task"):
        found += [int(pid) for pid in read_proc(f"/proc/{me}/task/{task}/children").split()]
    return found


def workers() -> list[int]:
    """This process's children that multiprocessing spawned (not its resource tracker)."""
    return [pid for pid in children() if b"spawn_main" in read_proc(f"/proc/{pid}/cmdline")]


SYSCALLS = {0: "read", 7: "poll", 202: "futex", 232: "epoll_wait", 271: "ppoll"}
"""x86_64 system call numbers a waiting worker shows in ``/proc/PID/syscall``: reading its
task queue's pipe (read, poll), or waiting for a lock (futex: the queue's read lock)."""


def waiting_in(pid: int) -> str:
    """The system call worker ``pid`` waits in ("running" when it runs, "" once it ended)."""
    fields = read_proc(f"/proc/{pid}/syscall").split()
    if not fields or fields[0] == b"running":
        return "running" if fields else ""
    number = int(fields[0])
    return SYSCALLS.get(number, str(number))


def zephon_frames(thread: threading.Thread | None) -> list[str]:
    """The thread's innermost frames in Zephon's runners, ``function:line``, innermost first."""
    frame = sys._current_frames().get(thread.ident or -1) if thread is not None else None
    out: list[str] = []
    while frame is not None and len(out) < 4:
        if "zephon" in frame.f_code.co_filename:
            out.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return out


def run(case: str) -> dict[str, Any]:
    it = iter(build())
    for _ in range(BEFORE):
        next(it)
    drawn = BEFORE
    if case == "paused":
        time.sleep(PAUSE_S)
    victims = workers()
    before = sorted(waiting_in(pid) for pid in victims)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + RESPAWN_S
    while len(set(workers()) - set(victims)) < len(victims) and time.monotonic() < deadline:
        if case == "drawing":
            next(it)
            drawn += 1
        else:
            time.sleep(0.05)
    respawned = len(set(workers()) - set(victims))
    for _ in range(AFTER):
        next(it)
        drawn += 1
    # Idle workers wait for their next command in the task queue's get(): one holds its read
    # lock and reads the pipe, the others wait for that lock (futex). None reading it means
    # the lock's holder is gone: a worker killed inside get().
    waiting = sorted(waiting_in(pid) for pid in set(workers()) - set(victims))
    closer = threading.Thread(target=it.close, name="closer", daemon=True)
    began = time.monotonic()
    closer.start()
    closer.join(CLOSE_S)
    closed = not closer.is_alive()
    watchdog = next((t for t in threading.enumerate() if t.name == WATCHDOG), None)
    return {
        "case": case,
        "killed": len(victims),
        "respawned": respawned,
        "drawn": drawn,
        "killed_waiting_in": before,
        "replacements_waiting_in": waiting,
        "closed_s": round(time.monotonic() - began, 2) if closed else None,
        "watchdog": [] if closed else zephon_frames(watchdog),
        "closing": [] if closed else zephon_frames(closer),
    }


def main() -> None:
    warnings.simplefilter("ignore")
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(CASES)}}}")
    line = run(sys.argv[1])
    print(json.dumps(line) + "\n", end="", flush=True)
    if line["closed_s"] is None:
        for pid in children():
            os.kill(pid, signal.SIGKILL)
        os._exit(0)


if __name__ == "__main__":
    main()
