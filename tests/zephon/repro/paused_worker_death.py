"""Standalone (torch, zephon and the standard library only): worker processes of a
``runner="process"`` pipeline killed while its consumer pauses wedge Zephon's watchdog; a
killed worker is never replaced and ``close()`` never returns.

Run: ``python paused_worker_death.py CASE``, CASE ``paused`` or ``drawing``. One rank
(``runner="process"``, torchtitan-zephon's default, 4 fetch workers), ``ZEPHON_WATCHDOG_POLL_S``
as the caller sets it. The consumer draws 3 batches; in ``paused`` it then pauses for
``PAUSE_S`` (a trainer's evaluation or checkpoint save: the prefetch fills and the workers
stop at their backpressure); every worker is SIGKILLed (the OOM killer, in a trainer);
the script waits for as many new worker processes (a logical event, bounded by
``RESPAWN_S``), in ``drawing`` drawing on as it waits; it draws 12 more and closes the
iterator, in a thread it waits ``CLOSE_S`` for.

Observed (zephon 0.2.0, 2 cores): ``drawing`` replaces every worker and closes in about 5 s.
``paused`` replaces 3 of the 4 and never closes: the watchdog thread blocks in
``multiprocessing.Queue.put`` inside ``_handle_dead_worker`` while it holds the runner's
``_shutdown_lock``, and the closing thread waits for that lock in ``_shutdown_workers``.
Nothing drains the task queue any more: the workers wait on their backpressure, and the
consumer is closing. The 12 batches in between are right (the live workers do the work);
what hangs is every later death and the shutdown, so a torchrun rank never exits.

Cause, in Zephon 0.2.0's source (``_internal/runners/process.py``):

- ``_watchdog_loop`` (995-1043) handles every dead worker inside
  ``with self._shutdown_lock`` (1021), one after another, in one pass;
- ``_handle_dead_worker`` (1077-1287) re-dispatches every pending command of the stage for
  each dead worker (``to_consider``, 1113-1114: 14 of them four times here) with a blocking
  ``task_queue.put(cmd)`` (1274-1284, "these puts can't deadlock"); the queue is bounded,
  ``queue_capacity`` x parallelism slots (1716-1719: 16 here), and the fresh worker drains
  it only as long as its results can flow on to a consumer;
- ``_shutdown_workers`` (1837-1838) takes ``_shutdown_lock`` without a timeout, after
  ``close()`` (2342-2358) gave the watchdog one second to stop (``_stop_watchdog``, 987-993).

Prints one JSON line: ``{"case", "killed", "respawned", "drawn", "closed_s" (None: not closed
within CLOSE_S), "watchdog", "closing"}``, the last two the innermost Zephon frames
(``function:line``) of the watchdog thread and of the closing thread when the close did not
return. A close that did not return leaves threads that would hang the interpreter's exit, so
the script then kills its children and leaves with ``os._exit``.
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
        "closed_s": round(time.monotonic() - began, 2) if closed else None,
        "watchdog": [] if closed else zephon_frames(watchdog),
        "closing": [] if closed else zephon_frames(closer),
    }


def main() -> None:
    warnings.simplefilter("ignore")
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(CASES)}}}")
    line = run(sys.argv[1])
    print(json.dumps(line), flush=True)
    if line["closed_s"] is None:
        for pid in children():
            os.kill(pid, signal.SIGKILL)
        os._exit(0)


if __name__ == "__main__":
    main()
