"""Persistence keeps a checkpoint's Python types in every format and names damaged files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zephon_chaos.workload import persist

CHECKPOINT = {
    "world": {"canonical_replicas": 6, "world_size": 2},
    "progress": {0: {"chunk_id": 0, "offset": 4}, 5: {"chunk_id": 1, "offset": 0}},
    "rr_next_idx": {"0/1:0,1,2": 0},
    "inflight": {0: {0: {"components": [["a", [[0, 2, 19]]]]}}},
    "pair": (1, 2),
    "tuple_keys": {(0, 1): b"\x00\x01"},
    "array": np.arange(4, dtype=np.int64),
    "none": None,
}


def _equal(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    return a == b


@pytest.mark.parametrize("fmt", persist.FORMATS)
def test_round_trip_keeps_types(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"c.{fmt}"
    persist.save(CHECKPOINT, path, fmt)
    assert _equal(persist.load(path, fmt), CHECKPOINT)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.integers() | st.text(), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(json_values)
def test_json_codec_is_exact(value: object) -> None:
    import json

    assert persist.decode(json.loads(json.dumps(persist.encode(value)))) == value


def test_digest_ignores_dict_order() -> None:
    a = {1: "x", 0: {"b": 1, "a": 2}}
    b = {0: {"a": 2, "b": 1}, 1: "x"}
    assert persist.digest(a) == persist.digest(b)
    assert persist.digest(a) != persist.digest({1: "x", 0: {"b": 1, "a": 3}})


@pytest.mark.parametrize("fmt", persist.FORMATS)
@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing"])
def test_damaged_files_are_named(tmp_path: Path, fmt: str, damage: str) -> None:
    path = tmp_path / "c.bin"
    persist.save(CHECKPOINT, path, fmt)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:20])
    elif damage == "garbage":
        path.write_bytes(b"\xffnot a checkpoint")
    else:
        path.unlink()
    with pytest.raises(persist.CheckpointFileError, match=str(path)):
        persist.load(path, fmt)


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown persistence format 'yaml'"):
        persist.save({}, tmp_path / "x", "yaml")
