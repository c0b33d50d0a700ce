"""``mtp-end-of-data-waits-for-every-rank``: in ``mtp_mode`` a rank's end of data runs a
checkpoint round of every rank, which fails where the others do not join it."""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect, run_of
from zephon_chaos.problem import Area, Problem
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario_rules import is_finite

MTP_CAPTURE_FAILED = "RuntimeError: MTP checkpoint failed in subprocess"
"""How Zephon words a failed checkpoint of the MTP child (``_internal/mtp.py`` 767)."""


def _mtp_end_of_data(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A launch of an ``mtp_mode`` pipeline over finite data failed because a rank's
    ``next()`` (its record's ``fetch_at``: the data's end) raised the MTP child's failed
    checkpoint: the implicit round at the end of its iteration, which no other rank joined."""
    if problem.area is not Area.LAUNCH or problem.kind != "RuntimeError":
        return False
    s = outcome.scenario
    if not s.pipeline.mtp_mode or not is_finite(s.data):
        return False
    run = run_of(outcome, problem)
    if run is None:
        return False
    return any(
        (error := rec.error) is not None
        and error.get("fetch_at") is not None
        and str(error.get("error", "")).startswith(MTP_CAPTURE_FAILED)
        for rec in run.records
        if rec.rank == problem.rank
    )


MTP_END_OF_DATA_WAITS = KnownDefect(
    id="mtp-end-of-data-waits-for-every-rank",
    summary=(
        "with mtp_mode=True, a rank whose data ends first cannot learn it: its next() runs a "
        "checkpoint round of every rank before StopIteration, so ranks that stop together on "
        "uneven data (or meet before their next checkpoint) leave it waiting out "
        "aggregate_timeout_s, and it raises RuntimeError instead of ending"
    ),
    evidence=(
        "zephon 0.2.0 _internal/pipeline.py Pipeline._iter_mtp (1863-1877): on the child's "
        "completed iteration, with mtp_auto_checkpoint on (options.py 147, the default), it "
        "calls MTPPipeline.checkpoint before the generator returns; the child answers with "
        "engine.state_dict() (mtp.py 405-407), an aggregation round expecting every rank "
        "(engine.py 1875-1880); the failed round is raised as 'MTP checkpoint failed in "
        "subprocess' (mtp.py 765-767). The in-process path ends with no round. Standalone: "
        "tests/zephon/repro/mtp_end_of_data.py (2 ranks stopping together on uneven lanes: "
        "StopIteration at once without mtp_mode; with it, RuntimeError after T = 6 s)"
    ),
    explains=_mtp_end_of_data,
)
