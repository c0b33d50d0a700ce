"""A checkpoint Zephon 0.1.0 took resumes under the Zephon under test, batch for batch.

``across_versions.py`` (torch and zephon only) runs twice: under 0.1.0 (from the folder
``ZEPHON_CHAOS_OLD_ZEPHON`` names, which ``scripts/old_zephon.py`` fills; tox does both) it
takes a mid-window and a boundary checkpoint on 2 ranks through ``aggregate_dir``; under
this environment's Zephon it resumes each on 1, 2 and 4 ranks, through a ``torch://host:port``
store that checkpoints again and resumes on 2 ranks, and in a 4-rank torchrun group through
``torch://`` (torchrun's store) that checkpoints and resumes once more. Every lane must
continue exactly where the checkpoint left it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.zephon.repro.launch import reported, run_script

SCRIPT = Path(__file__).with_name("across_versions.py")
OLD_VERSION = "0.1.0"
DEADLINE_S = 120.0
"""Measured on 2 cores: 3-4 s a run of threads, 7-8 s the torchrun group of 4."""
CHECKPOINTS = ("mid-window", "boundary")
CASES = [f"{n}-{how}" for n in CHECKPOINTS for how in ("dir-1", "dir-2", "dir-4", "store-1-then-2")]
GROUP = 4
GROUP_CASES = [f"{n}-torchrun-{GROUP}" for n in CHECKPOINTS]


@pytest.fixture
def old_zephon() -> Path:
    """The folder holding Zephon 0.1.0; skipped outside CI without it, failed in CI."""
    folder = os.environ.get("ZEPHON_CHAOS_OLD_ZEPHON")
    if folder and (Path(folder) / "zephon" / "__init__.py").is_file():
        return Path(folder)
    why = (
        f"Zephon {OLD_VERSION} not found (ZEPHON_CHAOS_OLD_ZEPHON={folder!r}): run through "
        "tox, or `python scripts/old_zephon.py DIR` and set ZEPHON_CHAOS_OLD_ZEPHON=DIR"
    )
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def test_a_checkpoint_the_previous_release_took_resumes_lane_for_lane(
    tmp_path: Path, old_zephon: Path
) -> None:
    saved = tmp_path / "taken.pkl"
    path = os.pathsep.join(p for p in (str(old_zephon), os.environ.get("PYTHONPATH")) if p)
    took = run_script(
        SCRIPT, tmp_path / "take", DEADLINE_S, args=["take", str(saved)], env={"PYTHONPATH": path}
    )
    assert f'"took": "{OLD_VERSION}"' in took, took[-3000:]

    import zephon

    text = run_script(SCRIPT, tmp_path / "resume", DEADLINE_S, args=["resume", str(saved)])
    lines = reported(text, "case", CASES, SCRIPT)
    text = run_script(
        SCRIPT, tmp_path / "group", DEADLINE_S, nproc=GROUP, args=["resume-group", str(saved)]
    )
    lines |= reported(text, "case", GROUP_CASES, SCRIPT)
    for case, line in lines.items():
        assert (line["taken_by"], line["resumed_by"]) == (OLD_VERSION, zephon.__version__), case
        assert line["lanes"] == [0, 1, 2, 3], case
        assert line["mismatches"] == [], case


def test_the_comparison_sees_a_lane_that_continues_elsewhere() -> None:
    """The script's own oracle fails a resume that skips a batch or draws nothing."""
    from tests.zephon.across_versions import mismatches

    stream = [[[0, 0, i]] for i in range(6)]
    saved = {"streams": {lane: stream for lane in range(4)}, "counts": {"c": {0: 2, 1: 2, 2: 1}}}
    got = {0: stream[2:4], 1: stream[3:5], 2: stream[1:3]}
    assert mismatches(saved, "c", got) == [
        "lane 1: batch 2 differs",
        "lane 3: no batch after the resume",
    ]
