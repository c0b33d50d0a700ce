"""Build the Zephon pipeline a spec describes: sources, mixture, batching, runtime options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zephon_chaos.lanes import dp_degree, dp_group
from zephon_chaos.workload.spec import DataSpec, PipelineSpec, SourceSpec


def row(source: str, shard: int, index: int) -> dict[str, Any]:
    return {"source": source, "shard": shard, "i": index, "text": f"{source}/{shard}/{index}"}


def materialize_jsonl(data: DataSpec, data_dir: Path | str) -> Path:
    """Write each jsonl source's shards under ``data_dir/<source>/`` (idempotent)."""
    root = Path(data_dir)
    for src in data.sources:
        if src.kind != "jsonl":
            continue
        folder = root / src.name
        folder.mkdir(parents=True, exist_ok=True)
        for shard, count in enumerate(src.shards):
            path = folder / f"shard-{shard:04d}.jsonl"
            if path.exists():
                continue
            tmp = path.with_suffix(".tmp")
            tmp.write_text(
                "".join(json.dumps(row(src.name, shard, j)) + "\n" for j in range(count))
            )
            tmp.replace(path)
    return root


def _dataset(src: SourceSpec, data_dir: str | None) -> Any:
    from zephon import Dataset, InMemoryShard

    if src.kind == "jsonl":
        if data_dir is None:
            raise ValueError(f"source {src.name!r} is jsonl but the spec names no data_dir")
        return Dataset.from_path(src.name, str(Path(data_dir) / src.name))
    shards = {
        shard: InMemoryShard([row(src.name, shard, j) for j in range(count)])
        for shard, count in enumerate(src.shards)
    }
    return Dataset.from_dict(src.name, shards)


def build_pipeline(
    data: DataSpec,
    pipeline: PipelineSpec,
    *,
    world_size: int,
    rank: int,
    data_dir: str | None = None,
    aggregate_store: str | None = None,
    aggregate_dir: str | None = None,
    tp: int = 1,
) -> Any:
    """``tp`` > 1: DP groups of ``tp`` ranks, passed as the downstream adapter passes them
    (``dp_degree`` the DP size, ``dp_group_id`` the DP rank); 1 leaves Zephon's 1D defaults."""
    from zephon import MixtureSpec, Pipeline, StaticMixtureWorkSource

    datasets = [_dataset(src, data_dir) for src in data.sources]
    source = StaticMixtureWorkSource(
        datasets=datasets,
        mixture=MixtureSpec({src.name: src.weight for src in data.sources}),
        chunk_size=data.chunk_size,
        seed=data.seed,
        shuffle_within_shard=data.shuffle,
        shuffle_shards=data.shuffle,
        exhausted_policy={src.name: src.exhausted for src in data.sources},
    )
    options: dict[str, Any] = {
        "world_size": world_size,
        "global_rank": rank,
        "canonical_replicas": pipeline.canonical_replicas,
        "mapping_strategy": pipeline.mapping,
        "run_id": pipeline.run_id,
        "runner": pipeline.runner,
        "mtp_mode": pipeline.mtp_mode,
        "aggregate_timeout_s": pipeline.aggregate_timeout_s,
        "aggregate_serializer": pipeline.aggregate_serializer,
        "aggregate_compressor": pipeline.aggregate_compressor,
        "prefetch_batches": pipeline.prefetch_batches,
        "shutdown_mode": pipeline.shutdown_mode,
    }
    if tp > 1:
        options["dp_degree"] = dp_degree(world_size, tp)
        options["dp_group_id"] = dp_group(rank, tp)
    if pipeline.runner == "process":
        options["max_workers"] = 2
    if aggregate_store is not None:
        options["aggregate_store"] = aggregate_store
    if aggregate_dir is not None:
        options["aggregate_dir"] = aggregate_dir
    return Pipeline(source).batch(microbatch_size=data.microbatch).options(**options)
