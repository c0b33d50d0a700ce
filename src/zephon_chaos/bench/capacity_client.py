"""One client process of the TCPStore capacity measurement (``python -m`` this module).

It opens ``--clients`` TCPStore connections to the server named on its command line, says
``ready`` on stdout, then runs one phase per line of stdin (a JSON :class:`Phase`): its first
``threads`` clients each repeat one operation for ``duration_s``, released together by a key
the parent sets on the store, and it answers with one JSON line of counts. ``quit`` or end of
input ends it; so does its own deadline (``--deadline-s``, an alarm), whatever the parent does.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

OPS = ("get", "set", "check", "wait", "get_big")
"""``get``/``check``/``wait`` of small existing keys; ``set`` of a small value (its reply is
not awaited, so each thread ends with one ``check`` that drains its writes); ``get_big`` of
the large value (the server's byte rate)."""

SMALL_KEYS = 16
SMALL_VALUE = b"x" * 64
BIG_KEY = "cap/big"
KEY_WAIT_S = 30.0
CONNECT_THREADS = 32


def small_key(i: int) -> str:
    return f"cap/key/{i % SMALL_KEYS}"


def go_key(phase: int) -> str:
    return f"cap/go/{phase}"


@dataclass(frozen=True)
class Phase:
    index: int
    op: str
    threads: int
    duration_s: float


@dataclass
class PhaseCounts:
    """One process's part of a phase: operations done, bytes received, and their time."""

    ops: int = 0
    bytes_in: int = 0
    began: float = math.inf
    """``time.monotonic()`` of the first thread's start (one clock for all processes)."""
    ended: float = 0.0
    """Of the last thread's end, its writes applied."""
    latency_sum_s: float = 0.0
    error: str = ""


def _one_thread(store: Any, phase: Phase, tid: int, out: list[PhaseCounts]) -> None:
    counts = PhaseCounts()
    try:
        store.wait([go_key(phase.index)], timedelta(seconds=KEY_WAIT_S))
        began = time.monotonic()
        end = began + phase.duration_s
        key = small_key(tid)
        own = f"cap/w/{phase.index}/{tid}"
        now = began
        while now < end:
            t0 = now
            if phase.op == "get":
                counts.bytes_in += len(store.get(key))
            elif phase.op == "set":
                store.set(own, SMALL_VALUE)
            elif phase.op == "check":
                store.check([key])
            elif phase.op == "wait":
                store.wait([key], timedelta(seconds=KEY_WAIT_S))
            else:
                counts.bytes_in += len(store.get(BIG_KEY))
            now = time.monotonic()
            counts.ops += 1
            counts.latency_sum_s += now - t0
        if phase.op == "set":
            store.check([own])  # same connection, in order: every set before it is applied
        counts.began, counts.ended = began, time.monotonic()
    except Exception as exc:  # one failed client fails the point, with its cause
        counts.error = f"client {tid}: {type(exc).__name__}: {exc}"
    out[tid] = counts


def run_phase(stores: list[Any], phase: Phase) -> PhaseCounts:
    out: list[PhaseCounts] = [PhaseCounts() for _ in range(phase.threads)]
    threads = [
        threading.Thread(target=_one_thread, args=(stores[i], phase, i, out), daemon=True)
        for i in range(phase.threads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(KEY_WAIT_S + phase.duration_s + KEY_WAIT_S)
    total = PhaseCounts()
    for c in out:
        total.ops += c.ops
        total.bytes_in += c.bytes_in
        total.began = min(total.began, c.began)
        total.ended = max(total.ended, c.ended)
        total.latency_sum_s += c.latency_sum_s
        total.error = total.error or c.error
    if any(t.is_alive() for t in threads):
        total.error = total.error or "a client thread did not finish its phase"
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--deadline-s", type=float, required=True)
    args = p.parse_args(argv)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the alarm ends this process outright
    signal.alarm(max(1, int(args.deadline_s + 0.999)))
    import torch.distributed as dist

    def connect(_: int) -> Any:
        return dist.TCPStore(args.host, args.port, is_master=False, wait_for_workers=False,
                             timeout=timedelta(seconds=KEY_WAIT_S))

    # Connecting one by one costs a handshake each; many at once keeps start-up to seconds.
    with ThreadPoolExecutor(max_workers=CONNECT_THREADS) as pool:
        stores = list(pool.map(connect, range(args.clients)))
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() in ("", "quit"):
            break
        phase = Phase(**json.loads(line))
        print(json.dumps(asdict(run_phase(stores, phase))), flush=True)
    stores.clear()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
