"""The model against ``bench aggregation``: calibrate, measure cells, compare.

Calibration measures what the model takes as given, apart from the rounds it predicts: CPU per
lane (a one-rank pipeline's snapshot, ``AggregationCodec`` encode and decode of its state),
encoded bytes per lane, and each latency setting's round trip (a lone client's ``check``
through the same path the ranks use). The cells are the bench's own rounds (rank threads of
this process, lockstep); ``aggregate_dir`` cells also count their file operations.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from zephon_chaos.bench.aggregation import CANONICAL_REPLICAS, Cell, measure_cell, median
from zephon_chaos.bench.capacity import CapacityResult
from zephon_chaos.bench.dir_counting import counting_file_ops
from zephon_chaos.bench.latency import LatencyVia, store_path
from zephon_chaos.bench.model import Cpu, DirParams, Round, StoreParams, dir_round, store_round

RTT_PROBES = 30
LEADER_THREAD = "bench-rank0"
LOCAL_FS_OP_S = 20e-6
"""A local file operation (the bench's ``aggregate_dir`` is a local directory)."""


@dataclass(frozen=True)
class Calibration:
    cpu: Cpu
    lane_bytes: float
    rtt_s: dict[int, float]
    """Measured round trip per one-way latency (ms) of the bench's path."""


@dataclass
class ValidationConfig:
    worlds: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    latencies_ms: list[int] = field(default_factory=lambda: [0, 2, 5])
    reps: int = 3
    dir_cells: bool = True
    via: LatencyVia = "proxy"

    def validate(self) -> None:
        problems = []
        if any(not 1 <= w <= 64 for w in self.worlds) or not self.worlds:
            problems.append(f"validation worlds must be 1..64, got {self.worlds}")
        if any(not 0 <= x <= 50 for x in self.latencies_ms):
            problems.append(f"validation latencies must be 0..50 ms, got {self.latencies_ms}")
        if not 1 <= self.reps <= 20:
            problems.append(f"validation rounds must be 1..20, got {self.reps}")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass(frozen=True)
class Comparison:
    mode: str
    world: int
    latency_ms: int
    measured_s: float
    predicted_s: float
    measured_ops: float
    predicted_ops: float
    error: str = ""

    @property
    def error_pct(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0


def lanes_for(world: int) -> int:
    """16 lanes (the grid's) up to 16 ranks; one lane per rank past that."""
    return CANONICAL_REPLICAS if world <= CANONICAL_REPLICAS else world


def calibrate(endpoint: tuple[str, int], latencies_ms: list[int], via: LatencyVia,
              lanes: int = CANONICAL_REPLICAS, reps: int = 5) -> Calibration:
    """CPU and bytes per lane of a one-rank pipeline, and the path's round trips."""
    from zephon._internal.checkpoint import AggregationCodec

    from zephon_chaos.workload.data import build_pipeline
    from zephon_chaos.workload.spec import DataSpec, PipelineSpec

    workdir = Path(tempfile.mkdtemp(prefix="zc-bench-cal-"))
    try:
        spec = PipelineSpec(canonical_replicas=lanes, run_id=f"zc-cal-{uuid.uuid4().hex[:8]}")
        pipe = build_pipeline(DataSpec(), spec, world_size=1, rank=0,
                              aggregate_dir=str(workdir / "aggregate"))
        it = iter(pipe)
        for _ in range(lanes):
            next(it)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            snap = _best(pipe.checkpoint, reps)
            state = pipe.checkpoint()
        codec = AggregationCodec()
        encoded = codec.encode(state)
        encode = _best(lambda: codec.encode(state), reps)
        decode = _best(lambda: codec.decode(encoded), reps)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cpu = Cpu(snapshot_lane_s=snap / lanes, encode_lane_s=encode / lanes,
              decode_lane_s=decode / lanes, merge_lane_s=encode / lanes, parallel=False)
    rtts = {lat: measure_rtt(endpoint, lat, via) for lat in sorted(set(latencies_ms))}
    return Calibration(cpu, len(encoded) / lanes, rtts)


def _best(fn: Callable[[], Any], reps: int) -> float:
    """Median of ``reps`` timings (a loaded machine: the median, not the minimum)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_rtt(endpoint: tuple[str, int], latency_ms: int, via: LatencyVia) -> float:
    """Median time of a lone ``check`` through the path ranks use at this latency."""
    import torch.distributed as dist

    with store_path(*endpoint, latency_ms, via) as path:
        client = dist.TCPStore(path.host, path.port, is_master=False, wait_for_workers=False,
                               timeout=timedelta(seconds=30))
        extra = 2 * latency_ms / 1000.0 if path.via == "client" else 0.0
        times = []
        for _ in range(RTT_PROBES):
            t0 = time.perf_counter()
            client.check(["zc/rtt-probe"])
            times.append(time.perf_counter() - t0 + extra)
        del client
    return statistics.median(times)


@contextmanager
def timing_leader_checks() -> Iterator[list[float]]:
    """Durations of the leader thread's ``check`` requests (rank 0 of the bench) meanwhile."""
    from zephon._internal.kvstore import TorchKVStore

    durations: list[float] = []
    original = TorchKVStore._call

    def timed(self: Any, op: str, key: object, fn: Callable[[Any], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return original(self, op, key, fn)
        finally:
            if op == "check" and threading.current_thread().name == LEADER_THREAD:
                durations.append(time.perf_counter() - t0)

    TorchKVStore._call = timed  # type: ignore[method-assign]
    try:
        yield durations
    finally:
        TorchKVStore._call = original  # type: ignore[method-assign]


def store_params(cap: CapacityResult, cal: Calibration, latency_ms: int) -> StoreParams:
    return StoreParams(one_way_s=latency_ms / 1000.0, base_rtt_s=cap.base_rtt_s(),
                       service_s=cap.service_s(), bytes_per_s=cap.bytes_per_s(),
                       rtt_s_measured=cal.rtt_s.get(latency_ms))


def bench_round(cal: Calibration, world: int) -> Round:
    return Round(world=world, lanes=lanes_for(world), lane_bytes=cal.lane_bytes, cpu=cal.cpu)


def run_validation(
    config: ValidationConfig,
    cap: CapacityResult,
    endpoint: tuple[str, int],
    log: Callable[[str], None] = print,
) -> tuple[Calibration, list[Comparison]]:
    """Calibrate, then measure each cell and put the model's prediction beside it."""
    config.validate()
    cal = calibrate(endpoint, config.latencies_ms, config.via)
    log(f"  calibration: snapshot {cal.cpu.snapshot_lane_s * 1e6:.0f} us, encode "
        f"{cal.cpu.encode_lane_s * 1e6:.0f} us, decode {cal.cpu.decode_lane_s * 1e6:.0f} us "
        f"per lane; {cal.lane_bytes:.0f} B per lane; round trip "
        + ", ".join(f"+{k} ms: {v * 1000:.2f} ms" for k, v in cal.rtt_s.items()))
    out: list[Comparison] = []
    for world in config.worlds:
        lanes = lanes_for(world)
        for latency in config.latencies_ms:
            cell = Cell("store", world, latency)
            with timing_leader_checks() as checks:
                measured = measure_cell(cell, config.reps, config.via, endpoint,
                                        f"zc-val-{uuid.uuid4().hex[:8]}", lanes)
            params = store_params(cap, cal, latency)
            if checks and world > 1:
                # The round trip the leader's requests met in the round itself: on a shared
                # machine, waking a rank thread (the scheduler, the GIL) is part of it.
                params = replace(params, rtt_s_measured=statistics.median(checks))
            est = store_round(bench_round(cal, world), params)
            out.append(_compare(cell, measured.times(),
                                [s.counts.ops for s in measured.samples], est.total_s,
                                est.calls, measured.error))
            log(_line(out[-1]))
        if config.dir_cells:
            cell = Cell("dir", world, 0)
            with counting_file_ops() as counts:
                measured = measure_cell(cell, config.reps, config.via, endpoint,
                                        f"zc-val-{uuid.uuid4().hex[:8]}", lanes)
            per_round = counts.total() / (config.reps + 1)
            est = dir_round(bench_round(cal, world), DirParams(op_s=LOCAL_FS_OP_S))
            out.append(_compare(cell, measured.times(), [per_round], est.total_s,
                                est.calls, measured.error))
            log(_line(out[-1]))
    return cal, out


def _compare(cell: Cell, times: list[float], ops: list[float], predicted: float,
             predicted_ops: float, error: str | None) -> Comparison:
    return Comparison(
        mode="torch://" if cell.mode == "store" else "aggregate_dir",
        world=cell.world, latency_ms=cell.latency_ms,
        measured_s=median(times), predicted_s=predicted,
        measured_ops=median([float(x) for x in ops]) if ops else float("nan"),
        predicted_ops=predicted_ops, error=error or "",
    )


def _line(c: Comparison) -> str:
    if c.error:
        return f"  {c.mode:13s} W={c.world:<3d} +{c.latency_ms}ms FAILED: {c.error}"
    return (f"  {c.mode:13s} W={c.world:<3d} +{c.latency_ms:<2d}ms measured "
            f"{c.measured_s * 1000:8.1f} ms, predicted {c.predicted_s * 1000:8.1f} ms "
            f"({c.error_pct:+5.0f} %); ops {c.measured_ops:.0f} vs {c.predicted_ops:.0f}")
