"""Persistence keeps a checkpoint's Python types in every typed format, shows plain JSON's
type loss, saves DCP on real gloo groups, and names damaged files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zephon_chaos.workload import persist

TYPED = tuple(f for f in persist.FORMATS if f != "plain_json")
"""Formats that give back exactly the Python values they were given."""
SCRIPTS = Path(__file__).parent / "scripts"
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


@pytest.mark.parametrize("fmt", TYPED)
def test_round_trip_keeps_types(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"c.{fmt}"
    persist.save(CHECKPOINT, path, fmt)
    assert _equal(persist.load(path, fmt), CHECKPOINT)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


PLAIN = {"progress": {0: {"chunk_id": 0, "offset": 4}}, "pair": (1, (2, 3)), "on": {True: None}}


def test_plain_json_gives_back_what_json_dumps_gives(tmp_path: Path) -> None:
    """Tuples come back as lists and int keys as strings: what a recipe's json.dump does."""
    path = tmp_path / "c.json"
    persist.save(PLAIN, path, "plain_json")
    back = persist.load(path, "plain_json")
    assert back == {
        "progress": {"0": {"chunk_id": 0, "offset": 4}},
        "pair": [1, [2, 3]],
        "on": {"true": None},
    }
    assert back == json.loads(json.dumps(PLAIN))
    assert persist.digest(back) == persist.digest(PLAIN)  # the oracles compare it with records


def test_plain_json_refuses_what_json_cannot_hold_and_names_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not plain JSON .*persist it as 'json'"):
        persist.save({"blob": b"\x00"}, tmp_path / "c.json", "plain_json")
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_dcp_holds_the_adapters_state_under_the_trainers_key(tmp_path: Path) -> None:
    """``{"dataloader": {"zephon": pickle(ckpt)}}``, readable by DCP alone as the trainer does."""
    import pickle

    import torch.distributed.checkpoint as dcp

    path = tmp_path / "c.dcp"
    persist.save(CHECKPOINT, path, "dcp")
    state: dict = {"dataloader": {"zephon": b""}}
    dcp.load(state, checkpoint_id=str(path))
    assert _equal(pickle.loads(state["dataloader"]["zephon"]), CHECKPOINT)


@pytest.mark.parametrize("state", [{}, {"zephon": b""}, {"zephon": "text"}])
def test_the_loader_state_refuses_missing_empty_or_non_bytes_state(state: dict) -> None:
    with pytest.raises(ValueError, match=r"dataloader\.zephon is .*not the pickled checkpoint"):
        persist.LoaderState().load_state_dict(state)


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_a_dcp_folder_without_the_loader_key_is_named(tmp_path: Path) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    path = tmp_path / "model.dcp"
    dcp.save({"model": {"w": torch.zeros(2)}}, checkpoint_id=str(path))
    with pytest.raises(persist.CheckpointFileError, match=f"(?s){path}.*Missing key .*dataloader"):
        persist.load(path, "dcp")


@pytest.mark.cpu
@pytest.mark.parametrize("nproc", [1, 2])
def test_dcp_saves_and_loads_collectively_on_a_gloo_group(
    torchrun_group, tmp_path: Path, nproc: int
) -> None:
    """Every rank saves the same checkpoint together and reads it back together; the folder
    then reads back in a process without a group, as the harness reads it."""
    out = tmp_path / "out"
    out.mkdir()
    result = torchrun_group(
        SCRIPTS / "dcp_round_trip.py",
        nproc=nproc,
        env={"DCP_OUT": str(out)},
        deadline_s=90,
    )
    result.raise_for_status()
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]
    assert [r["rank"] for r in reports] == list(range(nproc))
    assert all(r["world"] == nproc and r["loaded_exactly"] for r in reports)
    here = persist.load(out / "ckpt.dcp", "dcp")  # no process group in this process
    assert repr(here) == reports[0]["saved_repr"]  # the same values, of the same types


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
    persist.save(CHECKPOINT if fmt in TYPED else PLAIN, path, fmt)
    # A DCP checkpoint is a folder: damage its data file, its metadata, or the whole of it.
    target = next(path.glob("*.distcp")) if fmt == "dcp" else path
    if damage == "truncated":
        target.write_bytes(target.read_bytes()[:20])
    elif damage == "garbage":
        (path / persist.DCP_METADATA if fmt == "dcp" else path).write_bytes(b"\xffnot one")
    elif fmt == "dcp":
        shutil.rmtree(path)
    else:
        path.unlink()
    with pytest.raises(persist.CheckpointFileError, match=str(path)):
        persist.load(path, fmt)


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown persistence format 'yaml'"):
        persist.save({}, tmp_path / "x", "yaml")
