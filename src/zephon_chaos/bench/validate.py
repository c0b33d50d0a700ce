"""The model against ``bench aggregation``: calibrate, measure cells, compare.

Calibration measures what the model takes as given, apart from the rounds it predicts: CPU per
lane (a one-rank pipeline's snapshot, ``AggregationCodec`` encode and decode of its state),
encoded bytes per lane, and each latency setting's round trip (a lone client's ``check``
through the same path the ranks use). The cells are the bench's own rounds (rank threads of
this process, lockstep); ``aggregate_dir`` cells also count their file operations.
"""

from __future__ import annotations

import gc
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

from zephon_chaos.bench.aggregation import (
    CANONICAL_REPLICAS,
    Cell,
    measure_cell,
    median,
    settle,
)
from zephon_chaos.bench.capacity import CapacityResult
from zephon_chaos.bench.dir_counting import counting_file_ops
from zephon_chaos.bench.injected_latency import LatencyVia, store_path
from zephon_chaos.bench.round_model import (
    Cpu,
    DirParams,
    Round,
    StoreParams,
    dir_round,
    store_round,
)

RTT_PROBES = 30
LEADER_THREAD = "bench-rank0"
ONE_RANK_ROUNDS = 5
"""A one-rank cell is a lone snapshot of a few ms (no round): this many times the rounds, so
its mean is the snapshot's and not the machine's noise."""
POLL_BOUND_ROUNDS = 3
"""A round with no added latency (``aggregate_dir``, or the store at +0 ms) is a few whole poll
periods whose count differs from round to round (8-rank ``aggregate_dir``: 144-247 ms over
five rounds), and the first rounds after the warm-up are the slow ones (2 ranks at +0 ms: 41
ms over the first three against 28 over the next twelve): this many times the rounds."""


def rounds_for(cell: Cell, reps: int) -> int:
    """How many rounds the validation measures of ``cell``."""
    if cell.world == 1:
        return reps * ONE_RANK_ROUNDS
    if cell.mode == "dir" or cell.latency_ms == 0:
        return reps * POLL_BOUND_ROUNDS
    return reps


LOCAL_FS_OP_S = 20e-6
"""A local file operation (the bench's ``aggregate_dir`` is a local directory)."""


@dataclass(frozen=True)
class Calibration:
    cpu: Cpu
    lane_bytes: float
    rtt_s: dict[int, float]
    """Measured round trip per one-way latency (ms) of the bench's path."""
    fixed_bytes: float = 0.0
    rank_bytes: float = 0.0
    """The merged result's bytes per rank of the world."""


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


@dataclass(frozen=True)
class _StateCosts:
    """One rank's state at one lane count: snapshot, encode, decode (s) and its bytes."""

    snapshot_s: float
    encode_s: float
    decode_s: float
    encoded_bytes: int


@contextmanager
def _pipelines(world: int, lanes: int) -> Iterator[tuple[list[Any], list[Iterator[Any]]]]:
    """``world`` pipelines of one world (no rounds: their states are taken locally) and their
    iterators, each having taken one batch per lane it owns, with its tail prefetch settled."""
    from zephon_chaos.workload.data import build_pipeline
    from zephon_chaos.workload.spec import DataSpec, PipelineSpec

    workdir = Path(tempfile.mkdtemp(prefix="zc-bench-cal-"))
    try:
        spec = PipelineSpec(canonical_replicas=lanes, run_id=f"zc-cal-{uuid.uuid4().hex[:8]}")
        pipes = [build_pipeline(DataSpec(), spec, world_size=world, rank=rank,
                                aggregate_dir=str(workdir / "aggregate"))
                 for rank in range(world)]
        # Held, as the rank threads hold theirs: a dropped iterator closes its engine.
        iterators = [iter(pipe) for pipe in pipes]
        for it in iterators:
            for _ in range(lanes // world):
                next(it)
        for pipe in pipes:
            settle(pipe)
        yield pipes, iterators
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _state_costs(lanes: int, reps: int) -> _StateCosts:
    """A one-rank pipeline with ``lanes`` lanes (no round: one rank never aggregates)."""
    from zephon._internal.checkpoint import AggregationCodec

    with _pipelines(1, lanes) as ([pipe], [it]), warnings.catch_warnings():
        warnings.simplefilter("ignore")

        def step() -> None:  # as a bench rank between rounds: a batch per lane, settled
            for _ in range(lanes):
                next(it)
            settle(pipe)

        snapshot = _best(pipe.checkpoint, reps, before=step)
        state = pipe.checkpoint()
    codec = AggregationCodec()
    encoded = codec.encode(state)
    return _StateCosts(snapshot, _best(lambda: codec.encode(state), reps),
                       _best(lambda: codec.decode(encoded), reps), len(encoded))


def _merged_costs(world: int, lanes: int, reps: int) -> _StateCosts:
    """The leader's work on a ``world``-rank result: merge the decoded shards (its
    ``snapshot_s`` here), encode and decode the merged state, and its bytes."""
    from zephon._internal.checkpoint import AggregationCodec

    codec = AggregationCodec()
    with _pipelines(world, lanes) as (pipes, _):
        # The shards as the leader holds them: each rank's local state, encoded and decoded.
        shards = [codec.decode(codec.encode(p._engine._state_dict_local())) for p in pipes]
        merge = pipes[0]._engine._merge_state_dicts
        merged = merge(shards)
        merge_s = _best(lambda: merge(shards), reps)
    encoded = codec.encode(merged)
    return _StateCosts(merge_s, _best(lambda: codec.encode(merged), reps),
                       _best(lambda: codec.decode(encoded), reps), len(encoded))


def _fit(small: float, big: float, lanes: int) -> tuple[float, float]:
    """Fixed part and part per lane through a 1-lane and a ``lanes``-lane point."""
    per_lane = max(0.0, (big - small) / (lanes - 1))
    return max(0.0, small - per_lane), per_lane


def calibrate(endpoint: tuple[str, int], latencies_ms: list[int], via: LatencyVia,
              lanes: int = CANONICAL_REPLICAS, reps: int = 9) -> Calibration:
    """CPU and bytes of one rank's state (fixed and per lane, from a 1-lane and a
    ``lanes``-lane pipeline), of a merged result (per rank, from a 2-rank and a ``lanes``-rank
    world), client CPU per store request, and the path's round trips."""
    one, many = _state_costs(1, reps), _state_costs(lanes, reps)
    two, all_ranks = _merged_costs(2, lanes, reps), _merged_costs(lanes, lanes, reps)
    ranks = lanes - 2

    def per_rank(small: float, big: float) -> float:
        return max(0.0, (big - small) / ranks)

    merge_shard = per_rank(two.snapshot_s, all_ranks.snapshot_s)
    snapshot = _fit(one.snapshot_s, many.snapshot_s, lanes)
    encode = _fit(one.encode_s, many.encode_s, lanes)
    decode = _fit(one.decode_s, many.decode_s, lanes)
    fixed_bytes, lane_bytes = _fit(one.encoded_bytes, many.encoded_bytes, lanes)
    cpu = Cpu(snapshot_lane_s=snapshot[1], encode_lane_s=encode[1], decode_lane_s=decode[1],
              merge_lane_s=max(0.0, two.snapshot_s - 2 * merge_shard) / lanes, parallel=False,
              snapshot_fixed_s=snapshot[0], encode_fixed_s=encode[0], decode_fixed_s=decode[0],
              merge_shard_s=merge_shard,
              encode_rank_s=per_rank(two.encode_s, all_ranks.encode_s),
              decode_rank_s=per_rank(two.decode_s, all_ranks.decode_s),
              request_s=request_cpu(endpoint))
    rtts = {lat: measure_rtt(endpoint, lat, via) for lat in sorted(set(latencies_ms))}
    return Calibration(cpu, lane_bytes, rtts, fixed_bytes,
                       per_rank(two.encoded_bytes, all_ranks.encoded_bytes))


def _best(fn: Callable[[], Any], reps: int, before: Callable[[], None] | None = None
          ) -> float:
    """Median of ``reps`` timings (a loaded machine: the median, not the minimum), with no
    cyclic collection inside one, as the bench's rounds (``run_rounds``) and ``timeit``;
    ``before`` runs untimed ahead of each."""
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(reps):
            if before is not None:
                before()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return statistics.median(times)


def request_cpu(endpoint: tuple[str, int], requests: int = 200) -> float:
    """A lone client's CPU per request (Zephon's ``exists``: one TCPStore ``check``)."""
    from zephon_chaos.bench.counting import open_counted

    store = open_counted(*endpoint)
    try:
        for _ in range(10):
            store.exists("zc/cpu-probe")
        t0 = time.thread_time()
        for _ in range(requests):
            store.exists("zc/cpu-probe")
        return (time.thread_time() - t0) / requests
    finally:
        del store


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
    return Round(world=world, lanes=lanes_for(world), lane_bytes=cal.lane_bytes, cpu=cal.cpu,
                 fixed_bytes=cal.fixed_bytes, rank_bytes=cal.rank_bytes)


def run_validation(
    config: ValidationConfig,
    cap: CapacityResult,
    endpoint: tuple[str, int],
    log: Callable[[str], None] = print,
) -> tuple[Calibration, list[Comparison]]:
    """Calibrate, then measure each cell and put the model's prediction beside it."""
    config.validate()
    cal = calibrate(endpoint, config.latencies_ms, config.via)
    c = cal.cpu
    log(f"  calibration (fixed + per lane): snapshot {c.snapshot_fixed_s * 1e6:.0f} + "
        f"{c.snapshot_lane_s * 1e6:.0f} us, encode {c.encode_fixed_s * 1e6:.0f} + "
        f"{c.encode_lane_s * 1e6:.0f} us, decode {c.decode_fixed_s * 1e6:.0f} + "
        f"{c.decode_lane_s * 1e6:.0f} us; {cal.fixed_bytes:.0f} + {cal.lane_bytes:.0f} B; "
        f"result per rank: merge {c.merge_shard_s * 1e6:.0f} us, encode "
        f"{c.encode_rank_s * 1e6:.0f} us, decode {c.decode_rank_s * 1e6:.0f} us, "
        f"{cal.rank_bytes:.0f} B; "
        f"{c.request_s * 1e6:.0f} us client CPU a request; round trip "
        + ", ".join(f"+{k} ms: {v * 1000:.2f} ms" for k, v in cal.rtt_s.items()))
    out: list[Comparison] = []
    here = cal
    for index, world in enumerate(config.worlds):
        lanes = lanes_for(world)
        if index:
            # CPU calibrated again beside the cells it predicts: on a shared machine the CPU's
            # speed drifts over a run (the same merged encode: 12.5-19.5 ms in four runs a
            # few seconds apart), and a cell is held to the speed of its own minute.
            here = replace(calibrate(endpoint, [], config.via), rtt_s=cal.rtt_s)
            log(f"  recalibrated for {world} ranks: encode {here.cpu.encode_fixed_s * 1e6:.0f}"
                f" + {here.cpu.encode_lane_s * 1e6:.0f} us a lane + "
                f"{here.cpu.encode_rank_s * 1e6:.0f} us a rank of the result")
        for latency in config.latencies_ms:
            cell = Cell("store", world, latency)
            reps = rounds_for(cell, config.reps)
            with timing_leader_checks() as checks:
                measured = measure_cell(cell, reps, config.via, endpoint,
                                        f"zc-val-{uuid.uuid4().hex[:8]}", lanes)
            params = store_params(cap, here, latency)
            if checks and world > 1:
                # The round trip the leader's requests met in the round itself: on a shared
                # machine, waking a rank thread (the scheduler, the GIL) is part of it.
                params = replace(params, rtt_s_measured=statistics.median(checks))
            est = store_round(bench_round(here, world), params)
            out.append(_compare(cell, measured.times(),
                                [s.counts.ops for s in measured.samples], est.total_s,
                                est.calls, measured.error))
            log(_line(out[-1]))
        if config.dir_cells:
            cell = Cell("dir", world, 0)
            reps = rounds_for(cell, config.reps)
            with counting_file_ops() as counts:
                measured = measure_cell(cell, reps, config.via, endpoint,
                                        f"zc-val-{uuid.uuid4().hex[:8]}", lanes)
            per_round = counts.total() / (reps + 1)
            est = dir_round(bench_round(here, world), DirParams(op_s=LOCAL_FS_OP_S))
            out.append(_compare(cell, measured.times(), [per_round], est.total_s,
                                est.calls, measured.error))
            log(_line(out[-1]))
    return cal, out


def _compare(cell: Cell, times: list[float], ops: list[float], predicted: float,
             predicted_ops: float, error: str | None) -> Comparison:
    return Comparison(
        mode="torch://" if cell.mode == "store" else "aggregate_dir",
        world=cell.world, latency_ms=cell.latency_ms,
        # The model predicts an expectation (poll phases, races, ack polls), so the rounds'
        # mean is what it is held to; a median jumps between the modes of a cell whose rounds
        # differ by whole poll periods.
        measured_s=statistics.fmean(times) if times else float("nan"), predicted_s=predicted,
        measured_ops=median([float(x) for x in ops]) if ops else float("nan"),
        predicted_ops=predicted_ops, error=error or "",
    )


def _line(c: Comparison) -> str:
    if c.error:
        return f"  {c.mode:13s} W={c.world:<3d} +{c.latency_ms}ms FAILED: {c.error}"
    return (f"  {c.mode:13s} W={c.world:<3d} +{c.latency_ms:<2d}ms measured "
            f"{c.measured_s * 1000:8.1f} ms, predicted {c.predicted_s * 1000:8.1f} ms "
            f"({c.error_pct:+5.0f} %); ops {c.measured_ops:.0f} vs {c.predicted_ops:.0f}")
