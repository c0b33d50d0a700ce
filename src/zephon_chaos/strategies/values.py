"""The values the strategies draw from and their odds, and the cached draws they use:
the one table of what the generated space holds (``explore.space`` declares its cells
from it)."""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from hypothesis import strategies as st

from zephon_chaos.deployment import CHOICES as DEPLOYMENT_CHOICES
from zephon_chaos.deployment import RUN_ID_POLICIES as RUN_ID_POLICIES  # re-exported
from zephon_chaos.dimensions.settings import (
    AGGREGATE_TIMEOUTS_S as AGGREGATE_TIMEOUTS_S,
)
from zephon_chaos.dimensions.settings import (
    AGGREGATION_CHOICES as AGGREGATION_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    AGGREGATION_ODDS as AGGREGATION_ODDS,
)
from zephon_chaos.dimensions.settings import (
    CODEC_ODDS as CODEC_ODDS,
)
from zephon_chaos.dimensions.settings import (
    COMPRESSOR_CHOICES as COMPRESSOR_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    DEPLOYMENT_ODDS as DEPLOYMENT_ODDS,
)
from zephon_chaos.dimensions.settings import (
    DOWNSTREAM_AGGREGATION_ODDS as DOWNSTREAM_AGGREGATION_ODDS,
)
from zephon_chaos.dimensions.settings import (
    DOWNSTREAM_MTP_ODDS as DOWNSTREAM_MTP_ODDS,
)
from zephon_chaos.dimensions.settings import (
    DOWNSTREAM_PERSIST_ODDS as DOWNSTREAM_PERSIST_ODDS,
)
from zephon_chaos.dimensions.settings import (
    DOWNSTREAM_RUNNER_ODDS as DOWNSTREAM_RUNNER_ODDS,
)
from zephon_chaos.dimensions.settings import (
    INPROC_PERSIST_ODDS as INPROC_PERSIST_ODDS,
)
from zephon_chaos.dimensions.settings import (
    INPROC_RUNNER_ODDS as INPROC_RUNNER_ODDS,
)
from zephon_chaos.dimensions.settings import (
    MAPPING_CHOICES as MAPPING_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    MTP_CHOICES as MTP_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    PERSIST_FORMATS as PERSIST_FORMATS,
)
from zephon_chaos.dimensions.settings import (
    PREFETCH_CHOICES as PREFETCH_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    PREFETCH_ODDS as PREFETCH_ODDS,
)
from zephon_chaos.dimensions.settings import (
    PROFILES as PROFILES,
)
from zephon_chaos.dimensions.settings import (
    RUNNER_CHOICES as RUNNER_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    SERIALIZER_CHOICES as SERIALIZER_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    SHUTDOWN_CHOICES as SHUTDOWN_CHOICES,
)
from zephon_chaos.dimensions.settings import (
    SHUTDOWN_ODDS as SHUTDOWN_ODDS,
)
from zephon_chaos.dimensions.settings import (
    STORE_FAULT_AGGREGATION_ODDS as STORE_FAULT_AGGREGATION_ODDS,
)
from zephon_chaos.dimensions.settings import (
    STORE_FAULT_PERSIST_ODDS as STORE_FAULT_PERSIST_ODDS,
)
from zephon_chaos.dimensions.settings import (
    STORE_FAULT_TIMEOUT_S as STORE_FAULT_TIMEOUT_S,
)
from zephon_chaos.dimensions.settings import (
    TIERS as TIERS,
)
from zephon_chaos.dimensions.settings import (
    TORCHRUN_MTP_ODDS as TORCHRUN_MTP_ODDS,
)
from zephon_chaos.dimensions.settings import (
    TORCHRUN_PERSIST_ODDS as TORCHRUN_PERSIST_ODDS,
)
from zephon_chaos.dimensions.settings import (
    TORCHRUN_RUNNER_ODDS as TORCHRUN_RUNNER_ODDS,
)
from zephon_chaos.dimensions.settings import (
    Profile as Profile,
)
from zephon_chaos.dimensions.settings import (  # the settings' own values, re-exported
    Tier as Tier,
)
from zephon_chaos.scenario import STORE_ACTIONS
from zephon_chaos.scenario_rules import (
    FOLLOWER_POINTS,
    HEALING_TOXICS,
    LEADER_POINTS,
    RANK_POINT_ACTIONS,
    STALLING_TOXICS,
    STORE_AGGREGATIONS,
)
from zephon_chaos.workload.spec import (
    AT_STEP,
    CHILD_TARGETS,
    LINK_HEALS,
    PACKINGS,
    ROUND_PHASES,
    SHUFFLES,
)

# The package re-exports all of these (``from ...values import *``): a name added here is
# public as ``zephon_chaos.strategies.NAME``.
__all__ = [
    "AGGREGATE_TIMEOUTS_S",
    "AGGREGATION_CHOICES",
    "AGGREGATION_ODDS",
    "CHILD_FAULT_DRAW",
    "CODEC_ODDS",
    "COMPRESSOR_CHOICES",
    "DATA_KINDS",
    "DEPLOYMENT_CHOICES",
    "DEPLOYMENT_ODDS",
    "DOWNSTREAM_AGGREGATION_ODDS",
    "DOWNSTREAM_MTP_ODDS",
    "DOWNSTREAM_PACK_ODDS",
    "DOWNSTREAM_PERSIST_ODDS",
    "DOWNSTREAM_RUNNER_ODDS",
    "DOWNSTREAM_SHUFFLE_ODDS",
    "DOWNSTREAM_STAGE_ODDS",
    "DOWNSTREAM_TP_ODDS",
    "DROP_CHOICES",
    "EXHAUSTION_CHOICES",
    "EXHAUSTION_ODDS",
    "FOLLOWER_PHASES",
    "HEALING_TOXICS",
    "HOSTED_FAULT_DRAW",
    "HOSTED_STORE_ACTIONS",
    "HOSTED_STORE_POINTS",
    "HOSTED_STORE_ROUNDS",
    "INPROC_PERSIST_ODDS",
    "INPROC_RUNNER_ODDS",
    "LATENCIES_MS",
    "LAUNCH_CHOICES",
    "LEADER_PHASES",
    "LINK_FAULT_DRAW",
    "LINK_HEALS",
    "LINK_HEAL_DRAW",
    "MAPPING_CHOICES",
    "MORE_LAUNCHES",
    "MTP_CHOICES",
    "PACKINGS",
    "PACK_BINS",
    "PACK_LENGTHS",
    "PACK_ODDS",
    "PERSIST_FORMATS",
    "PREFETCH_CHOICES",
    "PREFETCH_ODDS",
    "PROCESS_FAULTS",
    "PROFILES",
    "RANK_FAULT_POINTS",
    "RESTART_CHOICES",
    "RESTART_ODDS",
    "ROUND_FAULTS",
    "ROUND_NUMBERS",
    "RUNNER_CHOICES",
    "RUN_ID_POLICIES",
    "SERIALIZER_CHOICES",
    "SHUFFLES",
    "SHUFFLE_BUFFERS",
    "SHUFFLE_ODDS",
    "SHUTDOWN_CHOICES",
    "SHUTDOWN_ODDS",
    "STAGE_ODDS",
    "STALLS_S",
    "STORE_FAULT_AGGREGATIONS",
    "STORE_FAULT_AGGREGATION_ODDS",
    "STORE_FAULT_PERSIST_ODDS",
    "STORE_FAULT_TIMEOUT_S",
    "STORE_TOXICS",
    "THREAD_FAULTS",
    "THREAD_TOXICS",
    "TIERS",
    "TOKEN_CHOICES",
    "TORCHRUN_MTP_ODDS",
    "TORCHRUN_PERSIST_ODDS",
    "TORCHRUN_RUNNER_ODDS",
    "TP_CHOICES",
    "TP_ODDS",
    "Profile",
    "Tier",
    "ints",
    "one_of",
    "weighted",
]

THREAD_FAULTS = ("raise",)
PROCESS_FAULTS = ("raise", "exit", "sigkill", "sigterm")
"""Simplest first. ``kill_agent`` is left to targeted tests; ``sigstop`` is drawn only at a
round point (``ROUND_FAULTS``), where the harness continues the stopped rank."""
ROUND_FAULTS = RANK_POINT_ACTIONS
"""Rank faults at a round point: ``PROCESS_FAULTS`` then ``sigstop`` (drawn at a step too,
where normalising drops it, so that the action keeps its meaning when ``at`` shrinks)."""
RANK_FAULT_POINTS = (AT_STEP, *ROUND_PHASES)
"""When a rank fault fires, simplest first: at a step, or before a write of a round point."""
ROUND_NUMBERS = (1, 2)
"""The round (``#n``) a round-point fault hits: the first, or one after a completed one."""
STORE_TOXICS = ("latency", "down", "reset_peer", "timeout")
THREAD_TOXICS = tuple(t for t in STORE_TOXICS if t not in STALLING_TOXICS)
"""Link faults the in-process tier draws: a stalled link would hold a rank thread inside the
C++ store client until the launch's deadline (``inproc.inproc_refusal``)."""
"""Link faults, simplest first: a slow link, a link that is gone, a connection reset, a link
that stalls (``timeout``: a known Zephon defect keeps store calls on it blocked, so a launch
that waits for the stalled rank hangs; it runs under a short deadline,
``nemeses.scenario_proxy.stall_deadline_s``, and its outcome is ``known.stalled-store-link``)."""
LATENCIES_MS = (10, 50, 200)
LEADER_PHASES = LEADER_POINTS
FOLLOWER_PHASES = FOLLOWER_POINTS
LAUNCH_CHOICES = ("standalone", "static", "c10d")
"""Launch paths a torchrun launch draws; threads have only the first."""
TP_CHOICES = (1, 2, 4)
"""Tensor-parallel ranks per DP group (``Launch.tp``), 1 (Zephon's 1D default) first; powers of
two, as trainers' TP degrees are (Zephon warns of any other ``world / dp_degree``)."""
TP_ODDS = (6, 3, 1)
DOWNSTREAM_TP_ODDS = (1, 4, 1)
"""The downstream's DP x TP with tp 2, two launches in three (torchrun tier)."""
STORE_FAULT_AGGREGATIONS = STORE_AGGREGATIONS
DATA_KINDS = ("memory", "jsonl")
EXHAUSTION_CHOICES = ("repeat", "stop")
EXHAUSTION_ODDS = (3, 1)
STAGE_ODDS = (1, 1)
"""Stages between the mixture and the batch (``StagesSpec``: a tokenizer's stand-in, packing,
a shuffle buffer)? Half the scenarios; none shrinks first. They cost a scenario little (the
map is pure Python on small rows) and hold per-lane state a resume must carry."""
DOWNSTREAM_STAGE_ODDS = (1, 4)
"""The downstream tokenizes, packs and shuffles every run: four in five."""
TOKEN_CHOICES = (9, 4, 16)
"""At most this many tokens a row; never more than a bin holds (``PACK_LENGTHS``), so that a
step's batches hold no more pieces than the data has rows and finite data still runs dry."""
DROP_CHOICES = (0, 5, 3)
"""The map drops one row in n (a filter), 0 first: none."""
PACK_ODDS = (2, 2, 1, 1, 1)
"""Odds of each of ``PACKINGS``: whole rows and split rows alike, none first."""
DOWNSTREAM_PACK_ODDS = (1, 3, 1, 3, 2)
PACK_LENGTHS = (16, 32)
PACK_BINS = (4, 1, 2)
SHUFFLE_ODDS = (2, 2, 1, 1)
"""Odds of each of ``SHUFFLES``, none first."""
DOWNSTREAM_SHUFFLE_ODDS = (1, 4, 1, 1)
SHUFFLE_BUFFERS = (8, 1, 32)

T = TypeVar("T")


@cache
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Cached: building and validating strategies per draw would dominate generation time."""
    return st.integers(lo, hi)


@cache
def one_of(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


@cache
def weighted(options: tuple[T, ...], weights: tuple[int, ...]) -> st.SearchStrategy[T]:
    """``options[k]`` with odds ``weights[k]``, shrinking to ``options[0]``."""
    cuts: list[tuple[int, T]] = []
    total = 0
    for option, weight in zip(options, weights, strict=True):
        total += weight
        cuts.append((total, option))
    return st.integers(0, total - 1).map(lambda k: next(o for cut, o in cuts if k < cut))


HOSTED_STORE_ACTIONS = STORE_ACTIONS
"""Faults of the harness-hosted store (``store_explicit``, torchrun tier, with ``faults``),
simplest first: restarted empty, killed, stopped."""
HOSTED_STORE_POINTS = ROUND_PHASES
HOSTED_STORE_ROUNDS = (1, 2)
STALLS_S = (1.0, 12.0)
"""How long a stopped store stays stopped: within the round's budget (T = 2 s: the round
may complete), and past its failure bound (9 s: the known stalled-store defect shows)."""
RESTART_CHOICES = (0, 1)
RESTART_ODDS = (3, 1)
"""torchrun ``--max-restarts`` of a launch with a rank fault: none, or one (torchrun tier)."""
HOSTED_FAULT_DRAW = weighted(("none", "fault"), (3, 1))
CHILD_FAULT_DRAW = weighted(("none", *CHILD_TARGETS), (2, 1, 1))
"""A kill of a rank's pipeline children (torchrun tier, with ``faults``)? Half the draws, all
of the rank's workers or one: normalising keeps it only beside worker processes, endless data
and no other fault."""

LINK_FAULT_DRAW = weighted(("none", "fault"), (1, 2))
"""A link fault in a launch that can take one? Twice in three: the point of ``store_faults``."""
LINK_HEAL_DRAW = weighted(LINK_HEALS, (1, 1))
"""Does a launch's link fault end with its round (``ProxyFault.until``)? Half the time, where
it is one of ``HEALING_TOXICS`` at a round point; ``never`` first. Drawn once per possible
launch after every other choice (``strategies.generate.healed``), and only with
``store_faults``: a scenario's other draws keep their meaning, and one without link faults
draws nothing more."""
MORE_LAUNCHES = weighted(("stop", "more"), (1, 3))
"""Another launch? Three times in four: most scenarios resume, yet shrinking stops early."""
