"""The grid of ``bench aggregation``: which cells, how many rounds, and a time bound."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from zephon_chaos.bench.aggregation import BenchError, Cell, CellResult, hosted_store, measure_cell
from zephon_chaos.bench.chunked import ChunkedSample, measure_kvstore, measure_pipeline
from zephon_chaos.bench.injected_latency import LatencyVia

MAX_WORLD = 32
MAX_LATENCY_MS = 200
MAX_REPS = 50
MAX_VALUE_MIB = 64.0


@dataclass
class GridConfig:
    worlds: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    latencies_ms: list[int] = field(default_factory=lambda: [0, 1, 10, 50])
    reps: int = 5
    modes: list[str] = field(default_factory=lambda: ["store", "dir"])
    via: LatencyVia = "proxy"
    chunk_sizes_mib: list[float] = field(default_factory=lambda: [1.0, 4.0, 8.0, 16.0])
    chunk_latencies_ms: list[int] = field(default_factory=lambda: [0, 10])
    pipeline: bool = True
    max_seconds: float = 1800.0

    @classmethod
    def quick(cls) -> GridConfig:
        """A small grid: minutes on two loaded cores, still every kind of measurement."""
        return cls(
            worlds=[1, 4, 16],
            latencies_ms=[0, 10],
            reps=3,
            chunk_sizes_mib=[1.0, 8.0],
            chunk_latencies_ms=[0],
            max_seconds=270.0,
        )

    def validate(self) -> None:
        problems = []
        if not self.worlds or any(not 1 <= w <= MAX_WORLD for w in self.worlds):
            problems.append(f"world sizes must be 1..{MAX_WORLD}, got {self.worlds}")
        if any(16 % w for w in self.worlds):
            problems.append(f"world sizes must divide the 16 lanes, got {self.worlds}")
        lat = self.latencies_ms + self.chunk_latencies_ms
        if any(not 0 <= x <= MAX_LATENCY_MS for x in lat):
            problems.append(f"latencies must be 0..{MAX_LATENCY_MS} ms, got {lat}")
        if not 1 <= self.reps <= MAX_REPS:
            problems.append(f"reps must be 1..{MAX_REPS}, got {self.reps}")
        if any(m not in ("store", "dir") for m in self.modes) or not self.modes:
            problems.append(f"modes must be store and/or dir, got {self.modes}")
        if any(not 0 < s <= MAX_VALUE_MIB for s in self.chunk_sizes_mib):
            problems.append(f"value sizes must be in (0, {MAX_VALUE_MIB}] MiB")
        if self.via not in ("proxy", "client"):
            problems.append(f"latency must be injected via proxy or client, got {self.via!r}")
        if self.max_seconds <= 0:
            problems.append("the time bound must be positive")
        if problems:
            raise ValueError("; ".join(problems))

    def cells(self) -> list[Cell]:
        cells = []
        for world in self.worlds:
            if "store" in self.modes:
                cells += [Cell("store", world, lat) for lat in self.latencies_ms]
            if "dir" in self.modes:
                cells.append(Cell("dir", world, 0))  # a local directory: no network latency
        return cells


@dataclass
class GridResult:
    config: GridConfig
    cells: list[CellResult] = field(default_factory=list)
    chunked: list[ChunkedSample] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def run_grid(config: GridConfig, log: Callable[[str], None] = print) -> GridResult:
    """Measure every cell, in order, until done or past ``max_seconds`` (the rest is skipped)."""
    config.validate()
    result = GridResult(config)
    began = time.monotonic()

    def over_budget(what: str) -> bool:
        if time.monotonic() - began > config.max_seconds:
            result.skipped.append(what)
            return True
        return False

    with hosted_store() as endpoint:
        for cell in config.cells():
            if over_budget(cell.label()):
                continue
            measured = measure_cell(cell, config.reps, config.via, endpoint,
                                    f"zc-bench-{uuid.uuid4().hex[:8]}")
            result.cells.append(measured)
            if measured.error:
                result.errors.append(f"{cell.label()}: {measured.error}")
            log(_cell_line(measured))
        for latency in config.chunk_latencies_ms:
            if over_budget(f"kvstore chunked values +{latency}ms"):
                continue
            try:
                samples = measure_kvstore(
                    config.chunk_sizes_mib, latency, config.reps, config.via, endpoint
                )
            except BenchError as exc:
                result.errors.append(f"kvstore chunked +{latency}ms: {exc}")
                continue
            result.chunked += samples
            log(f"  kvstore chunked values +{latency}ms: {len(samples)} samples")
        if config.pipeline and not over_budget("pipeline checkpoint past 4 MiB"):
            try:
                sample = measure_pipeline(0, config.via, endpoint)
                result.chunked.append(sample)
                log(f"  pipeline checkpoint past 4 MiB: {sample.size_bytes / 2**20:.1f} MiB merged "
                    f"in {sample.wall_s:.2f} s, {sample.counts.chunk_writes} chunk writes")
            except BenchError as exc:
                result.errors.append(f"pipeline chunked: {exc}")
    result.elapsed_s = time.monotonic() - began
    return result


def _cell_line(r: CellResult) -> str:
    if r.error:
        return f"  {r.cell.label():28s} FAILED: {r.error}"
    times = sorted(r.times())
    ops = sorted(s.counts.ops for s in r.samples)
    return (
        f"  {r.cell.label():28s} median {times[len(times) // 2] * 1000:8.1f} ms, "
        f"{ops[len(ops) // 2] if ops else 0:5d} store round trips"
    )
