"""A Zephon defect, standalone: with ``mtp_mode`` a rank whose data ends first cannot learn
it until every other rank's iteration ends too (``mtp_end_of_data.py``, torch and zephon
only, under torchrun). Ranks that stop together on uneven data get ``StopIteration`` at once
without ``mtp_mode``; with it, the short rank's ``next()`` waits out ``aggregate_timeout_s``
in an aggregation round no other rank joins and raises. The script's docstring cites the
lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import reported, run_script

SCRIPT = Path(__file__).with_name("mtp_end_of_data.py")
DEADLINE_S = 180.0
"""21 s measured on 2 cores: two ranks, one MTP child each, a 6 s round budget run out."""
RUNS = ("inline-0", "inline-1", "mtp-0", "mtp-1")
SHORT, LONG = 0, 1
"""Rank 0's lane holds fewer rows: its data ends first."""

Runs = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """What each rank reported in each case, from one torchrun launch of 2 ranks."""
    text = run_script(SCRIPT, tmp_path_factory.mktemp("mtp-end"), DEADLINE_S, nproc=2)
    return reported(text, "run", list(RUNS), SCRIPT)


def test_without_mtp_mode_the_short_rank_learns_at_once_and_both_stop(runs: Runs) -> None:
    """The control: the lanes are uneven, and the usual way to stop on that works."""
    short, long = runs[f"inline-{SHORT}"], runs[f"inline-{LONG}"]
    assert short["ended"] == "StopIteration" and short["last_next_s"] < short["timeout_s"]
    assert long["ended"] == "a peer's data ended" and long["batches"] > short["batches"]


@pytest.mark.zephon_defect("mtp-end-of-data-waits-for-every-rank")
def test_with_mtp_mode_the_short_ranks_end_waits_out_a_round_no_one_joins(runs: Runs) -> None:
    """The evidence: the end became a checkpoint round of every rank, failed by its budget."""
    short = runs[f"mtp-{SHORT}"]
    assert short["ended"].startswith("RuntimeError: MTP checkpoint failed in subprocess"), short
    assert "Missing ranks=[1]" in short["ended"], short
    assert short["last_next_s"] >= short["timeout_s"], short
    assert runs[f"mtp-{LONG}"]["ended"] == "a peer's data ended"


@pytest.mark.xfail(
    strict=True,
    reason="Zephon defect: with mtp_mode, Pipeline._iter_mtp checkpoints (a round of every "
    "rank) before the iteration's end reaches the caller (pipeline.py 1863-1877)",
)
def test_with_mtp_mode_the_short_rank_learns_its_data_ended_as_without_it(runs: Runs) -> None:
    short = runs[f"mtp-{SHORT}"]
    assert short["ended"] == "StopIteration" and short["last_next_s"] < short["timeout_s"]
