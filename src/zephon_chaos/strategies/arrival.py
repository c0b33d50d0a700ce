"""How a torchrun launch's ranks arrive at checkpoints: in lockstep, or free-running with
a deliberate lag and the policy after it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from zephon_chaos.scenario import Phase
from zephon_chaos.strategies.values import ints, one_of, weighted
from zephon_chaos.workload.spec import (
    RankLag,
)

SYNC_CHOICES = ("lockstep", "free")
SYNC_ODDS = (3, 1)
"""How a torchrun launch's ranks arrive at checkpoints (``Phase.sync``): meeting first, as
trainers do, or free-running. Rank threads meet in lockstep (``inproc.collective``) and a
lag needs a process group, so the in-process tier draws neither."""
LAG_CHOICES = ("none", "lag")
LAG_INDICES = (0, 1)
"""The checkpoint (in its launch) a lagging rank is late for: the first, or one after it."""
LAG_RETRIES = ("none", "skip", "lockstep")
"""The policy after a late round, simplest first; no ``independent`` beside a lag."""


def arrival(draw: st.DrawFn, phase: Phase, *, lags: bool = True) -> Phase:
    """``phase`` with how its ranks arrive: in lockstep, or free-running with (one time in
    two) a deliberate lag (``RankLag``: late by construction, a fault: only with ``lags``)
    and the policy after it.

    Drawn whatever the phase, so shrinking it keeps the meaning of these choices; normalising
    drops a lag the launch cannot carry (one rank, no such checkpoint, another fault)."""
    sync = draw(weighted(SYNC_CHOICES, SYNC_ODDS))
    lagged = draw(one_of(LAG_CHOICES)) == "lag"
    rank = draw(ints(0, 3)) % max(1, phase.world_size)
    index = draw(one_of(LAG_INDICES))
    retry = draw(one_of(LAG_RETRIES))
    if sync != "free" or not (lagged and lags) or phase.proxy_faults or phase.rank_faults:
        return replace(phase, sync=sync)  # type: ignore[arg-type]
    lag = RankLag(rank, checkpoint=index)
    return replace(phase, sync=sync, lags=(lag,), retry=retry)  # type: ignore[arg-type]
