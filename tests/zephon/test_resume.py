"""Elastic resume on real torchrun groups: resumed global batches equal an uninterrupted run.

Each row is a trajectory of world sizes; the phases between them checkpoint and restore
through the aggregation mode and persistence format of the row, launched by the row's paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.spec import (
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    SourceSpec,
    StagesSpec,
)

pytestmark = pytest.mark.cpu

EXACT = "identical global batches"
MULTISET = "mid-window contract (windows as multisets)"
TWO_SOURCES = DataSpec(
    sources=(SourceSpec("a", (30, 30, 30), 0.7), SourceSpec("b", (25, 25), 0.3, kind="jsonl"))
)
FINITE = DataSpec(sources=(SourceSpec("a", (40, 40), exhausted="stop"),), chunk_size=8)
SMALL_REPEAT = DataSpec(sources=(SourceSpec("a", (10, 6)),), chunk_size=8)
DOWNSTREAM_STAGES = StagesSpec(tokens=9, drop_every=5, pack="first_fit", shuffle="streaming")
"""tokenize -> pack -> shuffle, as torchtitan-zephon builds its loader: per-lane state (open
bins, the shuffle reservoir) that a checkpoint must carry."""


@dataclass(frozen=True)
class Row:
    sizes: tuple[int, ...]
    checkpoint: CheckpointAt = field(default_factory=lambda: CheckpointAt(2))
    canonical_replicas: int = 6
    aggregation: str = "store"
    persist_format: str = "pickle"
    launches: tuple[str, ...] = ("standalone",)
    contract: str = EXACT
    data: DataSpec = field(default_factory=DataSpec)
    pipeline: dict[str, object] = field(default_factory=dict)
    steps: int = 2
    exhausts: bool = False
    marks: tuple[pytest.MarkDecorator, ...] = ()


ROWS: dict[str, Row] = {
    "2-3-1": Row((2, 3, 1), launches=("standalone", "static", "c10d")),
    "1-2 explicit store, json": Row(
        (1, 2), aggregation="store_explicit", persist_format="json", launches=("static",)
    ),
    "3-2 dir, torch.save": Row(
        (3, 2), CheckpointAt(1), aggregation="dir", persist_format="torch", launches=("c10d",)
    ),
    "2-2": Row((2, 2)),
    "2-3 DCP on every rank, json codec uncompressed": Row(
        (2, 3),
        persist_format="dcp",
        pipeline={"aggregate_serializer": "json", "aggregate_compressor": "none"},
    ),
    "2-2 mid-window, same topology": Row((2, 2), CheckpointAt(1, 1)),
    "2-3 mid-window, resized": Row((2, 3), CheckpointAt(1, 1), contract=MULTISET),
    "2-4 C=6 (remainder 2)": Row((2, 4), pipeline={"mapping": "interleaved"}),
    "4-1 C=4": Row((4, 1), canonical_replicas=4),
    "2-3 two weighted sources, jsonl": Row((2, 3), data=TWO_SOURCES),
    "2-1 data runs out across the resume": Row(
        (2, 1), CheckpointAt(1), data=FINITE, steps=6, exhausts=True
    ),
    "1-3 epochs repeat across the resume": Row((1, 3), CheckpointAt(3), data=SMALL_REPEAT),
    "2-1 tokenized, packed first-fit, shuffled": Row(
        (2, 1), CheckpointAt(3), canonical_replicas=4, data=DataSpec(stages=DOWNSTREAM_STAGES)
    ),
    "1-3 rows split across bins, block shuffle, mid-window resized": Row(
        (1, 3),
        CheckpointAt(2, 1),
        canonical_replicas=6,
        contract=MULTISET,
        data=DataSpec(stages=StagesSpec(tokens=16, pack="wrap", shuffle="block_warmup")),
    ),
    "3-2 split rows packed best-fit, data runs out across the resume": Row(
        (3, 2),
        CheckpointAt(1),
        canonical_replicas=3,
        # ~6 rows a bin, 4 bins a batch: 400 rows give each lane about 5 batches; the step
        # count only bounds the launch (the rank stops when its data does).
        data=replace(
            FINITE,
            sources=(SourceSpec("a", (200, 200), exhausted="stop"),),
            stages=StagesSpec(tokens=9, pack="best_fit_wrap", pack_length=32),
        ),
        steps=400,
        exhausts=True,
    ),
    "2-3 thread runner": Row((2, 3), pipeline={"runner": "threads"}, marks=(pytest.mark.slow,)),
    "2-3 process runner": Row((2, 3), pipeline={"runner": "process"}, marks=(pytest.mark.slow,)),
    "2-3 mtp mode": Row((2, 3), pipeline={"mtp_mode": True}, marks=(pytest.mark.slow,)),
}


def scenario_of(name: str, row: Row) -> Scenario:
    last = len(row.sizes) - 1
    phases = tuple(
        Launch(
            world_size=g,
            steps=row.steps if i == last else row.checkpoint.step + 1,
            checkpoints=() if i == last else (row.checkpoint,),
            path=row.launches[i % len(row.launches)],  # type: ignore[arg-type]
        )
        for i, g in enumerate(row.sizes)
    )
    return Scenario(
        data=row.data,
        pipeline=PipelineSpec(
            canonical_replicas=row.canonical_replicas,
            aggregation=row.aggregation,  # type: ignore[arg-type]
            **row.pipeline,  # type: ignore[arg-type]
        ),
        launches=phases,
        persist_format=row.persist_format,
        name=name,
    )


@pytest.mark.parametrize("name", [pytest.param(n, id=n, marks=r.marks) for n, r in ROWS.items()])
def test_resumed_global_batches_match_an_uninterrupted_run(resume_check, name: str) -> None:
    row = ROWS[name]
    outcome = resume_check(scenario_of(name, row))
    assert outcome.ok, outcome.report()
    assert outcome.verdict is not None
    assert outcome.verdict.contract == row.contract
    assert outcome.verdict.steps_compared >= row.checkpoint.step + 1
    ran_out = [r.rank for r in outcome.phases[-1].records if r.exhausted_after is not None]
    assert bool(ran_out) == row.exhausts
    for run in outcome.phases[:-1]:
        (facts,) = run.checkpoints.facts
        assert sorted(facts.ok_ranks) == list(range(run.phase.world_size))
        assert facts.mid_window == bool(facts.warned)
        if row.persist_format == "dcp":  # every rank's part of DCP's folder, and its index
            saved = run.spec.checkpoint_path(facts.index)
            assert (saved / ".metadata").is_file()
            assert len(list(saved.glob("*.distcp"))) == run.phase.world_size
