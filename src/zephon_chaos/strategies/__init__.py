"""Hypothesis strategies for scenarios: the whole space users reach, shrinking to the simplest.

Trajectories of 1-5 launches over world sizes 1..max (same size again, growth, shrink, G not
dividing C, G > C, which Zephon must refuse), each launch a DP x TP layout (``tp`` ranks per
data-parallel group, 1 first: DP changes with TP fixed, TP with DP fixed, both), checkpoints
at any step (step 0 before the
first batch, mid-window, after the data ran out), every persistence format, aggregation mode
and runner, relaunches after a crash from the same checkpoint with the same run_id, rank
fault schedules (at a step or at a point of a checkpoint round, on the leader or a follower;
in process only ``raise``) and (``store_faults``) faults on a rank's link to the aggregation
store at a logical point of a checkpoint round, with the retry policy the workload follows
after a failed checkpoint.

Shrinking: every choice is drawn so that its simplest value comes first (integer ranges
start at the smallest, ``sampled_from`` lists start with the plainest option, optional parts
are lists that shrink to empty), so a failure shrinks toward few phases, small worlds, small
C and no faults.
"""

from __future__ import annotations

from zephon_chaos.scenario_rules import REFUSAL_ERROR as REFUSAL_ERROR  # re-exported
from zephon_chaos.scenario_rules import RUN_DRY_STEPS as RUN_DRY_STEPS  # re-exported
from zephon_chaos.scenario_rules import collective as collective  # re-exported
from zephon_chaos.strategies import values
from zephon_chaos.strategies.aiming import (
    AIM_CHOICES,
    AIM_ODDS,
    MORE_AIM_ODDS,
    WHOLE_SCENARIO_AIMS,
    aim,
    one_aim,
)
from zephon_chaos.strategies.arrival import (
    DRIFTS,
    LAG_CHOICES,
    LAG_INDICES,
    LAG_POLICIES,
    LAG_RETRIES,
    SYNC_CHOICES,
    SYNC_ODDS,
    arrival,
)
from zephon_chaos.strategies.generate import (
    data_specs,
    persist_odds,
    pipeline_specs,
    scenarios,
    settled,
    tp_odds,
)
from zephon_chaos.strategies.values import *  # noqa: F403 (the whole table: values.__all__)

__all__ = [
    "AIM_CHOICES",
    "AIM_ODDS",
    "DRIFTS",
    "LAG_CHOICES",
    "LAG_INDICES",
    "LAG_POLICIES",
    "LAG_RETRIES",
    "MORE_AIM_ODDS",
    "REFUSAL_ERROR",
    "RUN_DRY_STEPS",
    "SYNC_CHOICES",
    "SYNC_ODDS",
    "WHOLE_SCENARIO_AIMS",
    "aim",
    "arrival",
    "collective",
    "data_specs",
    "one_aim",
    "persist_odds",
    "pipeline_specs",
    "scenarios",
    "settled",
    "tp_odds",
]
__all__ += values.__all__
