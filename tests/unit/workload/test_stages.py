"""The stages before the batch (tokenize stand-in, pack, shuffle): their spec, and the sample
ids a rank records from a real Zephon pipeline that packs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from zephon_chaos.scenario import Launch, Scenario, ScenarioError
from zephon_chaos.workload.data import batch_ids, build_pipeline, segment_id, tokenized
from zephon_chaos.workload.records import SampleId
from zephon_chaos.workload.spec import (
    BINNED_PACKINGS,
    PACKINGS,
    DataSpec,
    PipelineSpec,
    SourceSpec,
    StagesSpec,
    plainer_stages,
    stage_count,
)

SOURCES = {"a": 0, "b": 1}


def test_the_tokenizer_stand_in_is_a_pure_function_of_the_row_and_drops_one_in_n() -> None:
    rows = [{"source": "b", "shard": 2, "i": i, "text": "t"} for i in range(12)]
    first = [tokenized(r, tokens=9, drop_every=4, sources=SOURCES) for r in rows]
    again = [tokenized(r, tokens=9, drop_every=4, sources=SOURCES) for r in rows]
    assert first == again
    dropped = [r["i"] for r, out in zip(rows, first, strict=True) if out is None]
    assert dropped == [3, 7, 11]
    kept = [out for out in first if out is not None]
    assert all(list(out) == ["input_ids"] for out in kept)  # only the token field
    assert all(1 <= len(out["input_ids"]) <= 9 for out in kept)
    assert {segment_id(out["input_ids"]) for out in kept} == {
        (1, 2, i) for i in range(12) if i % 4 != 3
    }


def test_a_segment_names_its_row_whole_or_sliced_and_a_mixed_one_is_refused() -> None:
    ids = tokenized({"source": "a", "shard": 1, "i": 5}, tokens=16, drop_every=0, sources=SOURCES)
    assert ids is not None
    tokens = ids["input_ids"]
    assert segment_id(tokens) == (0, 1, 5)
    assert segment_id(tokens[1:]) == (0, 1, 5)  # a wrapped row's suffix
    other = tokenized({"source": "a", "shard": 1, "i": 6}, tokens=16, drop_every=0, sources=SOURCES)
    assert other is not None
    with pytest.raises(ValueError, match="mixes rows"):
        segment_id(tokens[:1] + other["input_ids"][:1])
    with pytest.raises(ValueError, match="no tokens"):
        segment_id([])


FINITE = DataSpec(sources=(SourceSpec("a", (30, 25), exhausted="stop"),), chunk_size=8)
"""55 rows, 48 delivered: Zephon's ``stop`` ends a source at the first chunk it cannot fill."""


@pytest.fixture
def drawn(tmp_path: Path) -> Callable[..., list[list[SampleId]]]:
    """The ids a one-rank pipeline over ``FINITE`` records, batch by batch, to its end."""

    def draw(stages: StagesSpec, microbatch: int = 1) -> list[list[SampleId]]:
        data = replace(FINITE, stages=stages, microbatch=microbatch)
        options = PipelineSpec(canonical_replicas=2)
        pipe = build_pipeline(data, options, world_size=1, rank=0, aggregate_dir=str(tmp_path))
        return [batch_ids(batch, stages) for batch in pipe]

    return draw


@pytest.mark.parametrize("pack", [p for p in PACKINGS if p != "none"])
def test_a_packed_batch_lists_every_segment_of_its_bins(
    drawn: Callable[..., list[list[SampleId]]], pack: str
) -> None:
    """Every row the map kept shows up in the packed stream (whole rows once, split rows once
    a piece), but for the tail a wrapping packer drops when it cannot fill a bin (one a lane
    at most): the ids are the bins' contents, not one id a bin."""
    mapped = StagesSpec(tokens=9, drop_every=5)
    unpacked = Counter(sid for batch in drawn(mapped) for sid in batch)
    assert max(unpacked.values()) == 1
    assert all(i % 5 != 4 for _, _, i in unpacked)
    batches = drawn(replace(mapped, pack=pack, pack_bins=2))
    packed = Counter(sid for batch in batches for sid in batch)
    assert set(packed) <= set(unpacked)
    assert len(set(unpacked) - set(packed)) <= 2  # wrap: a lane's unfilled last bin
    assert max(len(batch) for batch in batches) > 1  # bins hold several rows
    split = max(packed.values()) > 1
    assert split == (pack not in BINNED_PACKINGS)  # only wrapping packers split a row


def test_without_packing_the_ids_are_zephons_own_and_a_shuffle_reorders_them(
    drawn: Callable[..., list[list[SampleId]]],
) -> None:
    shuffled = [sid for b in drawn(StagesSpec(tokens=4, shuffle="streaming")) for sid in b]
    plain = [sid for b in drawn(StagesSpec()) for sid in b]
    assert sorted(shuffled) == sorted(plain)
    assert len(plain) == 48
    assert shuffled != plain


@pytest.mark.parametrize(
    ("stages", "field"),
    [
        (StagesSpec(pack="first_fit"), "pack"),
        (StagesSpec(drop_every=3), "drop_every"),
        (StagesSpec(tokens=4, drop_every=1), "drop_every"),
        (StagesSpec(tokens=4, pack="zigzag"), "pack"),
        (StagesSpec(tokens=4, pack="wrap", pack_length=0), "pack_length"),
        (StagesSpec(shuffle="riffle"), "shuffle"),
        (StagesSpec(shuffle="block", shuffle_buffer=0), "shuffle_buffer"),
        (StagesSpec(tokens=1 << 10), "tokens"),
    ],
)
def test_a_stage_no_pipeline_could_run_is_refused_by_name(stages: StagesSpec, field: str) -> None:
    scenario = Scenario(data=DataSpec(stages=stages), launches=(Launch(world_size=1, steps=1),))
    with pytest.raises(ScenarioError, match=rf"data\.stages\.{field}:"):
        scenario.validate()


def test_stages_round_trip_and_a_file_without_them_has_none() -> None:
    stages = StagesSpec(tokens=9, drop_every=3, pack="best_fit_wrap", shuffle="block")
    scenario = Scenario(data=DataSpec(stages=stages), launches=(Launch(world_size=2, steps=2),))
    again = Scenario.from_json(scenario.to_json())
    assert again.data.stages == stages
    assert "stages tokens<=9 -1/3 -> pack best_fit_wrap(16) -> shuffle block(8)" in (
        again.summary()
    )
    old = Scenario.from_json('{"version": 3, "phases": [{"world_size": 1, "steps": 1}]}')
    assert old.data.stages == StagesSpec()
    assert "stages" not in old.summary()


def test_plainer_stages_are_valid_and_simpler_with_none_first() -> None:
    stages = StagesSpec(tokens=9, drop_every=3, pack="wrap", shuffle="streaming")
    plainer = plainer_stages(stages)
    assert plainer[0] == StagesSpec()
    assert all(s.invalid() is None for s in plainer)
    assert all(stage_count(s) < stage_count(stages) for s in plainer)
    assert StagesSpec(tokens=9, drop_every=3, pack="wrap") in plainer
    assert plainer_stages(StagesSpec()) == []
