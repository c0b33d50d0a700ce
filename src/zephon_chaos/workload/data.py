"""Build the Zephon pipeline a spec describes: sources, mixture, batching, runtime options."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from zephon_chaos.lanes import dp_degree, dp_group
from zephon_chaos.workload.records import SampleId
from zephon_chaos.workload.spec import (
    BINNED_PACKINGS,
    TOKEN_LIMIT,
    DataSpec,
    PipelineSpec,
    SourceSpec,
    StagesSpec,
)

TOKEN_SPAN = TOKEN_LIMIT
"""Token ``k`` of a row is ``code * TOKEN_SPAN + k``: a token names its row and its place in
it, so a packed segment, whole or a slice, says which sample it came from."""
_SHARD_BITS = 20
_SOURCE_BITS = 40


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


def tokenized(
    row: Mapping[str, Any], *, tokens: int, drop_every: int, sources: Mapping[str, int]
) -> dict[str, Any] | None:
    """The tokenizer's stand-in: 1..``tokens`` token ids a pure function of the row (so every
    lane's stream is reproducible), or None for one row in ``drop_every`` (a filter). Only the
    token field is kept, as a tokenizer without ``preserve_upstream_payload`` keeps it: a
    wrapping packer slices every field that has a length."""
    shard, index = int(row["shard"]), int(row["i"])
    if drop_every and index % drop_every == drop_every - 1:
        return None
    source = sources[row["source"]]
    code = (source << _SOURCE_BITS) | (shard << _SHARD_BITS) | index
    n = 1 + (index * 7 + shard * 3 + source) % tokens
    return {"input_ids": [code * TOKEN_SPAN + k for k in range(n)]}


def segment_id(token_ids: list[int]) -> SampleId:
    """The sample a packed segment was cut from, checked: one row's tokens, in order."""
    if not token_ids:
        raise ValueError("a packed segment holds no tokens")
    code, first = divmod(int(token_ids[0]), TOKEN_SPAN)
    expected = [code * TOKEN_SPAN + first + k for k in range(len(token_ids))]
    if [int(t) for t in token_ids] != expected:
        raise ValueError(f"a packed segment mixes rows or reorders tokens: {token_ids}")
    mask = (1 << _SHARD_BITS) - 1
    return (code >> _SOURCE_BITS, (code >> _SHARD_BITS) & mask, code & mask)


def batch_ids(batch: Any, stages: StagesSpec) -> list[SampleId]:
    """The samples a batch holds, in order. Without packing, Zephon's own ids; with it, every
    bin's segments in the bin's order, read from their tokens (a bin's ``ids`` entry names
    one sample of several). A row a wrapping packer split appears once per piece, as it does
    in the reference. Bin boundaries inside one batch are not part of this identity."""
    if stages.pack == "none":
        return [tuple(int(x) for x in sid) for sid in batch.ids]  # type: ignore[misc]
    return [
        segment_id(seg["input_ids"])
        for record in batch.records
        for seg in record.payload["packed_samples"]
    ]


def _with_stages(pipe: Any, data: DataSpec) -> Any:
    """tokenize -> pack -> shuffle, as the downstream orders them; each stage only if asked."""
    st = data.stages
    if st.tokens:
        sources = {src.name: i for i, src in enumerate(data.sources)}
        pipe = pipe.map_transform(
            partial(tokenized, tokens=st.tokens, drop_every=st.drop_every, sources=sources)
        )
    if st.pack != "none":
        bins = {"num_bins": st.pack_bins} if st.pack in BINNED_PACKINGS else {}
        pipe = pipe.pack_sequences(
            st.pack_length, algorithm=st.pack, tokens_field="input_ids", **bins
        )
    if st.shuffle != "none":
        pipe = pipe.shuffle(st.shuffle_buffer, seed=st.shuffle_seed, algorithm=st.shuffle)
    return pipe


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
    pipe = _with_stages(Pipeline(source), data)
    return pipe.batch(microbatch_size=data.microbatch).options(**options)
