"""The workload's error file: torch's format, and never visible half-written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the error file's format is torchelastic's")

from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
from torch.distributed.elastic.multiprocessing.errors import record as torch_record

from zephon_chaos.workload import atomic
from zephon_chaos.workload.error_file import record


def failing() -> None:
    raise ValueError("bad C")


def test_the_error_file_reads_as_torchelastic_reads_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = {}
    for name, wrap in (("ours", record), ("torch's", torch_record)):
        path = tmp_path / name / "error.json"
        path.parent.mkdir()
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
        with pytest.raises(ValueError, match="bad C"):
            wrap(failing)()
        read[name] = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(path))
        assert [p.name for p in path.parent.iterdir()] == ["error.json"]
    ours, theirs = read["ours"], read["torch's"]
    assert ours.message["message"] == theirs.message["message"] == "ValueError: bad C"
    assert ours.message["extraInfo"].keys() == theirs.message["extraInfo"].keys()
    assert "in failing" in ours.message["extraInfo"]["py_callstack"]
    assert abs(ours.timestamp - theirs.timestamp) <= 1


def test_the_error_file_appears_only_once_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the rename, a reader (the agent) finds no file at the error file's name."""
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    seen: list[tuple[bool, dict]] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append((Path(dst).exists(), json.loads(Path(src).read_text())))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(ValueError):
        record(failing)()
    assert len(seen) == 1
    existed, data = seen[0]
    assert not existed and data["message"]["message"] == "ValueError: bad C"
    assert json.loads(path.read_text()) == data
