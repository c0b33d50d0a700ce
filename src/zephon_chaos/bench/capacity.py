"""How many requests a c10d TCPStore server answers per second, against concurrent clients.

A real ``torch.distributed.TCPStore`` server (libuv, as torchrun's) on a loopback socket this
process holds; client processes (:mod:`zephon_chaos.bench.capacity_client`), each with many
threads and one TCPStore connection per thread, repeat one operation for a short window,
released together by a key set on the store. Every client process has its own deadline (an
alarm) and is killed with its process group at the end, whatever happened. On a small machine
the clients share the cores with the server, so the figures are a lower bound of the server's
capacity; the load is printed with them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from zephon_chaos.bench.capacity_client import (
    BIG_KEY,
    OPS,
    SMALL_KEYS,
    SMALL_VALUE,
    Phase,
    go_key,
    small_key,
)
from zephon_chaos.errors import HarnessError

MAX_CONNECTIONS = 1024
MAX_PROCESSES = 16
MAX_DURATION_S = 10.0
START_DEADLINE_S = 60.0
"""Importing torch and connecting every client, in each client process."""
PHASE_SLACK_S = 20.0
"""Beyond its window, for one phase: threads start, writes drain, counts come back."""


class CapacityError(HarnessError, RuntimeError):
    """The capacity measurement could not run; the message names the cause."""


@dataclass
class CapacityConfig:
    connections: list[int] = field(default_factory=lambda: [1, 16, 128, 512])
    ops: list[str] = field(default_factory=lambda: ["get", "set", "check", "wait"])
    processes: int = 4
    duration_s: float = 1.0
    big_value_bytes: int = 1 << 20
    big_connections: int = 16
    """``get_big`` (the byte rate) is measured at this many connections only."""

    @classmethod
    def tiny(cls) -> CapacityConfig:
        return cls(connections=[2, 4], ops=["check", "set"], processes=2, duration_s=0.2,
                   big_value_bytes=4096, big_connections=2)

    def validate(self) -> None:
        problems = []
        if not self.connections or any(not 1 <= c <= MAX_CONNECTIONS for c in self.connections):
            problems.append(f"connections must be 1..{MAX_CONNECTIONS}, got {self.connections}")
        if any(op not in OPS for op in self.ops) or not self.ops:
            problems.append(f"operations must be among {', '.join(OPS)}, got {self.ops}")
        if not 1 <= self.processes <= MAX_PROCESSES:
            problems.append(f"client processes must be 1..{MAX_PROCESSES}, got {self.processes}")
        if not 0 < self.duration_s <= MAX_DURATION_S:
            problems.append(f"the window must be in (0, {MAX_DURATION_S}] s")
        if not 0 < self.big_value_bytes <= 4 << 20:
            problems.append("the large value must be 1 byte..4 MiB (one TCPStore write)")
        if problems:
            raise ValueError("; ".join(problems))

    def phases(self) -> list[tuple[str, int]]:
        """(operation, connections) in the order measured."""
        points = [(op, c) for op in self.ops for c in self.connections]
        if self.big_connections:
            points.append(("get_big", self.big_connections))
        return points

    def deadline_s(self) -> float:
        """A bound on one client process's whole life (start-up, every window, slack)."""
        per_phase = self.duration_s + PHASE_SLACK_S
        return START_DEADLINE_S + per_phase * len(self.phases())


@dataclass(frozen=True)
class CapacityPoint:
    op: str
    connections: int
    processes: int
    ops_per_s: float
    mean_latency_s: float
    bytes_per_s: float
    error: str = ""


@dataclass
class CapacityResult:
    points: list[CapacityPoint] = field(default_factory=list)
    load_before: str = ""
    load_after: str = ""
    client_pids: list[int] = field(default_factory=list)
    port: int = 0

    def ok(self) -> list[CapacityPoint]:
        return [p for p in self.points if not p.error]

    def peak_ops_per_s(self, op: str) -> float:
        rates = [p.ops_per_s for p in self.ok() if p.op == op]
        return max(rates) if rates else math.nan

    def service_s(self) -> float:
        """Server time per request: one over the best request rate of the reads and checks."""
        peak = max((self.peak_ops_per_s(op) for op in ("get", "check", "wait")
                    if not math.isnan(self.peak_ops_per_s(op))), default=math.nan)
        return 1.0 / peak if peak and not math.isnan(peak) else math.nan

    def base_rtt_s(self) -> float:
        """One request and its reply with no queue: the least mean latency of one connection."""
        lone = [p.mean_latency_s for p in self.ok()
                if p.connections == 1 and p.op in ("get", "check", "wait")]
        if not lone:
            lone = [p.mean_latency_s for p in self.ok() if p.op in ("get", "check", "wait")]
        return min(lone) if lone else math.nan

    def bytes_per_s(self) -> float:
        rates = [p.bytes_per_s for p in self.ok() if p.op == "get_big"]
        return max(rates) if rates else math.nan


class _Client:
    """One client process: its pipes, a reader thread, and a kill of its process group."""

    def __init__(self, host: str, port: int, clients: int, deadline_s: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zephon_chaos.bench.capacity_client", "--host", host,
             "--port", str(port), "--clients", str(clients), "--deadline-s", str(deadline_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def expect(self, deadline: float) -> str:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise CapacityError(
                f"client process {self.proc.pid} gave no answer before its deadline"
            ) from None
        if line is None:
            raise CapacityError(f"client process {self.proc.pid} ended early: {self.stderr()}")
        return line

    def stderr(self) -> str:
        with contextlib.suppress(Exception):
            if self.proc.poll() is not None and self.proc.stderr is not None:
                return self.proc.stderr.read()[-500:].strip() or f"exit {self.proc.returncode}"
        return "still running"

    def close(self, grace_s: float = 5.0) -> None:
        with contextlib.suppress(Exception):
            self.send("quit")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # its session: it and anything it started
        self.proc.wait(grace_s)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()
        self._reader.join(grace_s)


@contextlib.contextmanager
def _clients(host: str, port: int, per_process: list[int], deadline_s: float
             ) -> Iterator[list[_Client]]:
    started: list[_Client] = []
    try:
        for n in per_process:
            started.append(_Client(host, port, n, deadline_s))
        yield started
    finally:
        for c in started:
            c.close()


def split(total: int, parts: int) -> list[int]:
    """``total`` connections over at most ``parts`` processes, as evenly as possible."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def measure_capacity(
    config: CapacityConfig, log: Callable[[str], None] = print
) -> CapacityResult:
    """Measure every (operation, connections) point against one TCPStore server."""
    from zephon_chaos.bench.machine import load_note
    from zephon_chaos.launch.store_host import StoreHost

    config.validate()
    result = CapacityResult(load_before=load_note())
    most = max(max(config.connections), config.big_connections)
    slots = split(most, config.processes)
    deadline_s = config.deadline_s()
    host = StoreHost(timeout_s=30.0)
    result.port = host.port
    try:
        server = host.store
        for i in range(SMALL_KEYS):
            server.set(small_key(i), SMALL_VALUE)
        server.set(BIG_KEY, b"b" * config.big_value_bytes)
        with _clients(host.host, host.port, slots, deadline_s) as procs:
            result.client_pids = [c.proc.pid for c in procs]
            start_by = time.monotonic() + START_DEADLINE_S
            for c in procs:
                if c.expect(start_by) != "ready":
                    raise CapacityError(f"client process {c.proc.pid} did not start")
            for index, (op, conns) in enumerate(config.phases()):
                point = _measure_point(server, procs, index, op, conns, config)
                result.points.append(point)
                log(_line(point))
    finally:
        host.close()
        result.load_after = load_note()
    return result


def _measure_point(server: object, procs: list[_Client], index: int, op: str, conns: int,
                   config: CapacityConfig) -> CapacityPoint:
    shares = split(conns, len(procs))
    active = procs[: len(shares)]
    phase_deadline = time.monotonic() + config.duration_s + PHASE_SLACK_S
    for c, threads in zip(active, shares, strict=True):
        c.send(json.dumps(Phase(index, op, threads, config.duration_s).__dict__))
    server.set(go_key(index), b"1")  # type: ignore[attr-defined]
    answers = [json.loads(c.expect(phase_deadline)) for c in active]
    error = next((a["error"] for a in answers if a["error"]), "")
    ops = sum(a["ops"] for a in answers)
    # The window runs from the first client's start to the last one's end, over all processes
    # (one monotonic clock): staggered starts cannot inflate the rate.
    elapsed = (max(a["ended"] for a in answers) - min(a["began"] for a in answers)) or math.nan
    return CapacityPoint(
        op=op,
        connections=conns,
        processes=len(active),
        ops_per_s=ops / elapsed,
        mean_latency_s=sum(a["latency_sum_s"] for a in answers) / ops if ops else math.nan,
        bytes_per_s=sum(a["bytes_in"] for a in answers) / elapsed,
        error=error,
    )


def _line(p: CapacityPoint) -> str:
    if p.error:
        return f"  {p.op:8s} {p.connections:4d} connections: FAILED: {p.error}"
    extra = f", {p.bytes_per_s / 2**20:7.0f} MiB/s" if p.op == "get_big" else ""
    return (f"  {p.op:8s} {p.connections:4d} connections ({p.processes} processes): "
            f"{p.ops_per_s:9.0f} ops/s, mean latency {p.mean_latency_s * 1e6:8.0f} us{extra}")
