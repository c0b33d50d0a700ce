"""How a torchrun launch's ranks arrive at checkpoints: in lockstep, or free-running with
a deliberate lag and the policy after it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from zephon_chaos.scenario import Launch
from zephon_chaos.strategies.values import ints, one_of, weighted
from zephon_chaos.workload.spec import (
    RankLag,
)

SYNC_CHOICES = ("lockstep", "free")
SYNC_ODDS = (3, 1)
"""How a torchrun launch's ranks arrive at checkpoints (``Launch.sync``): meeting first, as
trainers do, or free-running. Rank threads meet in lockstep (``inproc.collective``) and a
lag needs a process group, so the in-process tier draws neither."""
LAG_CHOICES = ("none", "lag")
LAG_INDICES = (0, 1)
"""The checkpoint (in its launch) a lagging rank is late for: the first, or one after it."""
LAG_RETRIES = ("none", "skip", "lockstep")
"""The policy after a late round, simplest first (``independent`` is drawn apart, below)."""
LAG_POLICIES = (*LAG_RETRIES, "independent")
"""Every policy a lag is drawn beside: ``independent`` lets each rank retry alone, and every
merged checkpoint its ranks get is judged by resuming it (``runner.verify``)."""
ALONE_CHOICES = ("drawn", "independent")
ALONE_ODDS = (2, 1)
"""Whether a lagged launch's ranks retry alone instead of the policy drawn (a draw of its
own after the others, so a seed drawn before it existed keeps its other choices)."""
DRIFTS = (0, 0, 1, 2)
"""Whole checkpoint intervals a lagging rank drifts behind its peer (``RankLag.by``); the
rules keep a drift from an agreeing policy (a deadlock) and within the launch's checkpoints."""


def arrival(draw: st.DrawFn, phase: Launch, *, lags: bool = True) -> Launch:
    """``phase`` with how its ranks arrive: in lockstep, or free-running with (one time in
    two) a deliberate lag (``RankLag``: late by construction, a fault: only with ``lags``),
    the policy after it, and how many whole checkpoint intervals it drifts behind.

    Drawn whatever the phase, so shrinking it keeps the meaning of these choices; normalising
    drops a lag the launch cannot carry (one rank, no such checkpoint, another fault)."""
    sync = draw(weighted(SYNC_CHOICES, SYNC_ODDS))
    lagged = draw(one_of(LAG_CHOICES)) == "lag"
    rank = draw(ints(0, 3)) % max(1, phase.world_size)
    index = draw(one_of(LAG_INDICES))
    retry = draw(one_of(LAG_RETRIES))
    if sync != "free" or not (lagged and lags) or phase.proxy_faults or phase.rank_faults:
        return replace(phase, sync=sync)  # type: ignore[arg-type]
    if draw(weighted(ALONE_CHOICES, ALONE_ODDS)) == ALONE_CHOICES[1]:
        retry = "independent"
    by = DRIFTS[draw(ints(0, len(DRIFTS) - 1))]
    lag = RankLag(rank, checkpoint=index, by=by)
    return replace(phase, sync=sync, lags=(lag,), retry=retry)  # type: ignore[arg-type]
