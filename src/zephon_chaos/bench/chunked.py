"""Values over the store's 4 MiB write limit: the chunked path, alone and in a checkpoint.

KVStore level: ``stage_value`` writes the chunks, the manifest is published at the key, and
another client reads it back with ``read_staged_value`` (Zephon's own functions, over the
counting store). Pipeline level: two rank threads whose merged checkpoint (uncompressed JSON
aggregation, large in-flight chunks) is past 4 MiB, so the leader's result travels chunked.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from zephon_chaos.bench.aggregation import ROUND_TIMEOUT_S, BenchError, release, run_rounds
from zephon_chaos.bench.counting import METER, SCHEME, Counts, open_counted, register
from zephon_chaos.bench.injected_latency import LatencyVia, store_path

MIB = 1024 * 1024
PIPELINE_ROWS = 48_000
"""Rows per shard and chunk size: 8 lanes x 48k in-flight sample ids ≈ 5.6 MB of JSON."""
PIPELINE_LANES = 8
PIPELINE_WORLD = 2


@dataclass
class ChunkedSample:
    kind: str  # "kvstore-write", "kvstore-read" or "pipeline"
    size_bytes: int
    latency_ms: int
    via: str
    rep: int
    wall_s: float
    counts: Counts
    wire_bytes: int | None = None


def measure_kvstore(
    sizes_mib: list[float], latency_ms: int, reps: int, via: LatencyVia, endpoint: tuple[str, int]
) -> list[ChunkedSample]:
    """Write (stage + manifest) and read back values of each size, ``reps`` times."""
    out: list[ChunkedSample] = []
    with store_path(*endpoint, latency_ms, via) as path:
        clients = [open_counted(path.host, path.port, ROUND_TIMEOUT_S) for _ in range(2)]
        try:
            _round_trips(clients, sizes_mib, reps, latency_ms, path, out)
        finally:
            release(clients)
    return out


def _round_trips(
    clients: list[Any], sizes_mib: list[float], reps: int, latency_ms: int, path: Any,
    out: list[ChunkedSample],
) -> None:
    """Write with one client, read back with the other, for each size, ``reps`` times."""
    from zephon._internal.kvstore import read_staged_value, stage_value

    writer, reader = clients
    writer.exists("zc-bench/warm-up")
    reader.exists("zc-bench/warm-up")
    for size_mib in sizes_mib:
        data = os.urandom(int(size_mib * MIB))
        for rep in range(reps):
            key = f"zc-bench/{uuid.uuid4().hex}"
            wire0 = path.wire_bytes()
            before = METER.snapshot()
            began = time.monotonic()
            staged = stage_value(writer, key, data)
            writer.set(key, staged.manifest)
            wrote = time.monotonic()
            after_write = METER.snapshot()
            wire1 = path.wire_bytes()
            # A write is visible to others some time after ``set`` returns: wait for it.
            visible = reader.wait([key], ROUND_TIMEOUT_S)
            manifest = reader.get(key) if visible else None
            if manifest is None:
                raise BenchError(f"the manifest of {key} was not readable after its write")
            back = read_staged_value(reader, key, manifest)
            read = time.monotonic()
            after_read = METER.snapshot()
            wire2 = path.wire_bytes()
            if back != data:
                raise BenchError(f"a {size_mib} MiB value came back changed")
            for k in [*staged.chunk_keys, key]:
                writer.delete(k)
            common = dict(size_bytes=len(data), latency_ms=latency_ms, via=path.via, rep=rep)
            out.append(
                ChunkedSample(
                    "kvstore-write", wall_s=wrote - began, counts=after_write.minus(before),
                    wire_bytes=_delta(wire0, wire1), **common,  # type: ignore[arg-type]
                )
            )
            out.append(
                ChunkedSample(
                    "kvstore-read", wall_s=read - wrote,
                    counts=after_read.minus(after_write),
                    wire_bytes=_delta(wire1, wire2), **common,  # type: ignore[arg-type]
                )
            )


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


def measure_pipeline(
    latency_ms: int, via: LatencyVia, endpoint: tuple[str, int], rows: int = PIPELINE_ROWS
) -> ChunkedSample:
    """One checkpoint of two rank threads whose merged state is past 4 MiB."""
    register()
    with store_path(*endpoint, latency_ms, via) as path:
        run_id = f"zc-bench-big-{uuid.uuid4().hex[:8]}"
        pipes = [
            _big_pipeline(rank, f"{SCHEME}://{path.host}:{path.port}", rows, run_id)
            for rank in range(PIPELINE_WORLD)
        ]
        found: list[ChunkedSample] = []
        wire = [path.wire_bytes()]

        def on_round(index: int, wall_s: float, counts: Counts, state: int) -> None:
            now = path.wire_bytes()
            found.append(
                ChunkedSample("pipeline", state, latency_ms, path.via, index, wall_s, counts,
                              _delta(wire[0], now))
            )
            wire[0] = now

        try:
            run_rounds(pipes, 1, on_round, steps_between=0, lanes=PIPELINE_LANES)
        finally:
            release(pipes)
    sample = found[0]
    if sample.counts.chunk_writes == 0:
        raise BenchError(
            f"the merged checkpoint ({sample.size_bytes} bytes) did not take the chunked path; "
            "raise the rows per chunk"
        )
    return sample


def _big_pipeline(rank: int, store: str, rows: int, run_id: str) -> Any:
    from zephon_chaos.validation.probe import one_dataset_pipeline

    shards = {s: [{"i": j} for j in range(rows)] for s in range(PIPELINE_LANES)}
    pipe = one_dataset_pipeline("big", shards, chunk_size=rows, seed=7, microbatch=4)
    return pipe.options(
        world_size=PIPELINE_WORLD,
        global_rank=rank,
        canonical_replicas=PIPELINE_LANES,
        run_id=run_id,
        aggregate_store=store,
        aggregate_timeout_s=ROUND_TIMEOUT_S,
        aggregate_serializer="json",
        aggregate_compressor="none",
    )
