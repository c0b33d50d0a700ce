"""Standalone (torch and zephon only): a pipeline's child processes outlive a killed parent.

Run: ``python orphaned_children.py``. Each case runs a pipeline in a process of its own that
draws 4 batches, lists its descendants, and then dies by ``end``; this script then watches
those descendants for ``WATCH_S`` and kills what is left.

- ``mtp`` (``mtp_mode=True``, torchtitan-zephon's default): the MTP child lives on. Its item
  loop, finding the data queue full, drains the control pipe (``_drain_ctrl``, zephon 0.2.0
  ``_internal/mtp.py`` 430-431): ``poll(0)`` is true at the dead parent's end of the pipe and
  ``recv()`` raises ``EOFError``; the ``except Exception`` around the loop (376-379) then puts
  an error sentinel on that full queue with no timeout (``multiprocessing`` ``Queue.put``
  waits for room), whose only reader was the parent. It never reaches ``engine.close()``, so
  the workers of its own runner live on too (``mtp+process``).
- ``process`` (``runner="process"``, the downstream default, without ``mtp_mode``): every
  worker waits in ``task_queue.get()`` with no timeout (``_process_worker_main``,
  ``_internal/runners/process.py`` 456) and never looks at its parent; only the control
  service's proxy does (``parent.is_alive()``, 359).

``end``: ``sigkill`` (the OOM killer's signal, or ``kill -9``), ``sigterm`` (Python's default
action ends the process with no clean-up), or ``exit`` (``close()``, then a normal exit: the
control, whose children end). Under torchrun the agent's teardown signals the worker's whole
process group (``os.killpg``), which reaches these children; a rank killed alone with its agent
gone too, or a trainer run without torchrun, leaves them running, with their buffers.

Prints one JSON line per case and end: ``{"case", "end", "children", "alive"}``: how many
descendants the process had, and how many were still alive ``WATCH_S`` after it died.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

CASES: dict[str, dict[str, Any]] = {
    "mtp": {"mtp_mode": True},
    "mtp+process": {"mtp_mode": True, "runner": "process"},
    "process": {"runner": "process"},
}
ENDS = ("sigkill", "sigterm", "exit")
WATCH_S = 8.0
"""How long the descendants of a dead process are watched (a clean exit's end in under 2 s)."""
DEADLINE_S = 120.0


def build(options: dict[str, Any]) -> Any:
    from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

    rows = {s: InMemoryShard([{"s": s, "i": i} for i in range(400)]) for s in range(3)}
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
        .options(world_size=1, global_rank=0, canonical_replicas=2, run_id="orphans", **options)
    )


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            found += kids
            todo += kids
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] not in "ZX"
    except OSError:
        return False


def pipeline_process(case: str, end: str) -> None:
    pipe = build(CASES[case])
    it = iter(pipe)
    for _ in range(4):
        next(it)
    print(json.dumps(descendants(os.getpid())) + "\n", end="", flush=True)
    if end != "exit":
        os.kill(os.getpid(), getattr(signal, end.upper()))
    it.close()


def one(case: str, end: str) -> dict[str, Any]:
    proc = subprocess.Popen(
        [sys.executable, __file__, case, end], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    proc.wait(timeout=DEADLINE_S)
    kids = json.loads(line) if line else []
    watch_end = time.monotonic() + WATCH_S
    while time.monotonic() < watch_end and any(alive(k) for k in kids):
        time.sleep(0.1)  # polling /proc: a process that is not our child cannot be waited on
    left = [k for k in kids if alive(k)]
    for k in left:
        os.kill(k, signal.SIGKILL)
    return {"case": case, "end": end, "children": len(kids), "alive": len(left)}


def main() -> None:
    if len(sys.argv) == 3:
        pipeline_process(sys.argv[1], sys.argv[2])
        return
    for case in CASES:
        for end in ENDS:
            print(json.dumps(one(case, end)) + "\n", end="", flush=True)


if __name__ == "__main__":
    main()
