"""Checkpoint aggregation at scale: time and store traffic against ranks, latency and backend.

Ranks are threads of this process, one Zephon pipeline each with explicit
``world_size``/``global_rank``: the measurement is the aggregation protocol (announce, shards,
merge, result, acknowledgements over the store or a directory), not process start-up. Every
round is lockstep: all ranks start ``pipe.checkpoint()`` at one barrier; a round's time runs
from the first rank leaving that barrier to the last rank's return, and its traffic is the
store requests made in between (exact, from the counting store).
"""

from __future__ import annotations

import gc
import shutil
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from zephon_chaos.bench.counting import METER, SCHEME, Counts, register
from zephon_chaos.bench.injected_latency import LatencyVia, store_path
from zephon_chaos.errors import HarnessError

Mode = Literal["store", "dir"]
CANONICAL_REPLICAS = 16
SETTLE_S = 10.0
SETTLE_POLL_S = 0.01
SETTLED_READS = 4
ROUND_TIMEOUT_S = 120.0


class BenchError(HarnessError, RuntimeError):
    """A measurement could not run; the message names the cell and the cause."""


@dataclass(frozen=True)
class Cell:
    """One point of the grid."""

    mode: Mode
    world: int
    latency_ms: int = 0

    def label(self) -> str:
        if self.mode == "dir":
            return f"aggregate_dir W={self.world}"
        return f"torch:// W={self.world} +{self.latency_ms}ms"


@dataclass
class Sample:
    """One measured checkpoint round."""

    cell: Cell
    rep: int
    wall_s: float
    counts: Counts
    wire_bytes: int | None = None
    state_bytes: int = 0


@dataclass
class CellResult:
    cell: Cell
    via: str
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None

    def times(self) -> list[float]:
        return [s.wall_s for s in self.samples]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: with few samples, an observed value)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@contextmanager
def hosted_store() -> Iterator[tuple[str, int]]:
    """A TCPStore server on a loopback socket we hold (never on other interfaces)."""
    from zephon_chaos.launch.store_host import StoreHost

    host = StoreHost(timeout_s=ROUND_TIMEOUT_S)
    try:
        yield host.host, host.port
    finally:
        host.close()


def _pipelines(
    cell: Cell,
    endpoint: tuple[str, int] | None,
    agg_dir: Path | None,
    run_id: str,
    lanes: int = CANONICAL_REPLICAS,
) -> list[Any]:
    from zephon_chaos.workload.data import build_pipeline
    from zephon_chaos.workload.spec import DataSpec, PipelineSpec

    data = DataSpec()
    spec = PipelineSpec(
        canonical_replicas=lanes, run_id=run_id, aggregate_timeout_s=ROUND_TIMEOUT_S
    )
    store = f"{SCHEME}://{endpoint[0]}:{endpoint[1]}" if endpoint else None
    return [
        build_pipeline(
            data,
            spec,
            world_size=cell.world,
            rank=rank,
            aggregate_store=store,
            aggregate_dir=str(agg_dir) if agg_dir else None,
        )
        for rank in range(cell.world)
    ]


def settle(pipe: Any) -> None:
    """Wait until the pipeline's tail prefetch has filled (its state stops growing).

    The in-flight samples of the prefetched batches are part of every checkpoint, and a
    trainer checkpoints after a step's compute, during which its loader's prefetch refills.
    A state taken right after the batches carries a third of them (measured: 1.2 against
    2.1 KB a shard at 16 ranks), and its refill competes with the round for the interpreter.
    """
    from zephon._internal.checkpoint import AggregationCodec

    codec = AggregationCodec()
    deadline = time.monotonic() + SETTLE_S
    sizes: list[int] = []
    while time.monotonic() < deadline:
        sizes.append(len(codec.encode(pipe._engine._state_dict_local())))
        if len(sizes) >= SETTLED_READS and len(set(sizes[-SETTLED_READS:])) == 1:
            return
        time.sleep(SETTLE_POLL_S)  # polling a condition (the state's size), with a deadline
    raise BenchError(f"a bench pipeline's state kept changing for {SETTLE_S} s "
                     f"(sizes {sizes[-5:]}): its prefetch never settled")


def run_rounds(
    pipes: list[Any],
    rounds: int,
    on_round: Callable[[int, float, Counts, int], None],
    steps_between: int = 1,
    lanes: int = CANONICAL_REPLICAS,
) -> None:
    """Drive ``len(pipes)`` rank threads through ``rounds`` lockstep checkpoint rounds.

    Each rank first takes one batch per lane it owns; after each round, ``steps_between``
    more. ``on_round(index, wall_s, counts, state_bytes)`` runs on the calling thread between
    rounds. A failing rank fails the whole measurement with its error.
    """
    world = len(pipes)
    start = threading.Barrier(world + 1, timeout=ROUND_TIMEOUT_S)
    done = threading.Barrier(world + 1, timeout=ROUND_TIMEOUT_S)
    starts: list[float] = [0.0] * world
    ends: list[float] = [0.0] * world
    sizes: list[int] = [0] * world
    errors: list[str] = []
    per_lane = lanes // world

    def rank_main(rank: int) -> None:
        try:
            it = iter(pipes[rank])
            for _ in range(per_lane):
                next(it)
            for _ in range(rounds):
                settle(pipes[rank])
                start.wait()
                starts[rank] = time.monotonic()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ckpt = pipes[rank].checkpoint()
                ends[rank] = time.monotonic()
                if rank == 0:
                    sizes[0] = _encoded_size(ckpt)
                done.wait()
                for _ in range(per_lane * steps_between):
                    next(it)
        except threading.BrokenBarrierError:
            return
        except BaseException as exc:
            errors.append(f"rank {rank}: {type(exc).__name__}: {exc}")
            start.abort()
            done.abort()

    threads = [
        threading.Thread(target=rank_main, args=(r,), name=f"bench-rank{r}", daemon=True)
        for r in range(world)
    ]
    for t in threads:
        t.start()
    # As timeit does: no cyclic collection inside a measured round. The ranks are threads of
    # one process, so one collection of their shared heap (16 pipelines, torch, Zephon) stops
    # every rank at once, for 100-250 ms at 16 ranks: a pause of the harness that ranks in
    # processes of their own, each with its own small heap, do not share.
    gc.collect()
    gc.disable()
    try:
        for index in range(rounds):
            before = METER.snapshot()
            start.wait()
            done.wait()
            on_round(index, max(ends) - min(starts), METER.snapshot().minus(before), sizes[0])
    except threading.BrokenBarrierError:
        pass
    finally:
        gc.enable()
        start.abort()
        done.abort()
        for t in threads:
            t.join(ROUND_TIMEOUT_S)
    if errors:
        raise BenchError("; ".join(errors[:3]))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        raise BenchError(f"rank threads did not finish within {ROUND_TIMEOUT_S} s: {alive}")


def release(pipes: list[Any]) -> None:
    """Drop the pipelines (and their store clients) while the path to the store still exists."""
    pipes.clear()
    gc.collect()


def _encoded_size(ckpt: dict[str, Any]) -> int:
    import json

    return len(json.dumps(ckpt, default=str))


def measure_cell(
    cell: Cell,
    reps: int,
    via: LatencyVia,
    endpoint: tuple[str, int],
    tag: str,
    lanes: int = CANONICAL_REPLICAS,
) -> CellResult:
    """One warm-up round (connections, first encode), then ``reps`` measured rounds.

    ``lanes`` (canonical replicas, a multiple of the world size) beyond 16 lets worlds past 16
    run; the grid keeps 16."""
    register()
    result = CellResult(cell, via="none" if cell.mode == "dir" else via)
    workdir = Path(tempfile.mkdtemp(prefix="zc-bench-agg-"))
    try:
        with store_path(*endpoint, cell.latency_ms if cell.mode == "store" else 0, via) as path:
            result.via = path.via if cell.mode == "store" else "none"
            agg_dir = workdir / "aggregate" if cell.mode == "dir" else None
            pipes = _pipelines(
                cell,
                (path.host, path.port) if cell.mode == "store" else None,
                agg_dir,
                tag,
                lanes,
            )
            wire = [path.wire_bytes()]

            def on_round(index: int, wall_s: float, counts: Counts, state: int) -> None:
                now = path.wire_bytes()
                delta = None if now is None or wire[0] is None else now - wire[0]
                wire[0] = now
                if index > 0:  # round 0 is the warm-up
                    result.samples.append(Sample(cell, index, wall_s, counts, delta, state))

            try:
                run_rounds(pipes, reps + 1, on_round, lanes=lanes)
            finally:
                release(pipes)
    except BenchError as exc:
        result.error = str(exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result
