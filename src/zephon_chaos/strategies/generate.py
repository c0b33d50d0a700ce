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

from dataclasses import replace
from functools import cache
from typing import Any, Literal

from hypothesis import strategies as st

from zephon_chaos.aims import Aim, AimKind, Draws, aimed, link_attributes
from zephon_chaos.scenario import STORE_ACTIONS, Phase, ProxyFault, Scenario, StoreFault
from zephon_chaos.scenario_rules import (
    FOLLOWER_POINTS,
    LEADER_POINTS,
    RANK_POINT_ACTIONS,
    STALLING_TOXICS,
    STORE_AGGREGATIONS,
    lanes_per_rank,
    normalised,
)
from zephon_chaos.scenario_rules import REFUSAL_ERROR as REFUSAL_ERROR  # re-exported
from zephon_chaos.scenario_rules import RUN_DRY_STEPS as RUN_DRY_STEPS  # re-exported
from zephon_chaos.scenario_rules import collective as collective  # re-exported
from zephon_chaos.validation.values import (
    AGGREGATE_COMPRESSORS,
    AGGREGATE_SERIALIZERS,
    SHUTDOWN_MODES,
)
from zephon_chaos.workload.spec import (
    AT_STEP,
    RETRIES,
    ROUND_PHASES,
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    RankLag,
    Retry,
    SourceSpec,
)

Tier = Literal["inproc", "torchrun"]
TIERS: tuple[Tier, ...] = ("inproc", "torchrun")
Profile = Literal["default", "downstream"]
PROFILES: tuple[Profile, ...] = ("default", "downstream")
"""``downstream``: the odds of what torchtitan-zephon runs (worker processes, ``mtp_mode``,
torchrun's store, DCP persistence, DP x TP layouts with tp 2) become the common case on
torchrun; ``default`` keeps worker processes rare, as each launch of them takes tens of
seconds."""
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
``faults.scenario_proxy.stall_deadline_s``, and its outcome is ``known.stalled-store-link``)."""
LATENCIES_MS = (10, 50, 200)
LEADER_PHASES = LEADER_POINTS
FOLLOWER_PHASES = FOLLOWER_POINTS
STORE_FAULT_TIMEOUT_S = 2.0
"""``aggregate_timeout_s`` of a scenario with link faults: a failing round ends in seconds."""
LAUNCH_CHOICES = ("standalone", "static", "c10d")
"""Launch paths a torchrun launch draws; threads have only the first."""
RUNNER_CHOICES = ("inline", "threads", "process")
INPROC_RUNNER_ODDS = (2, 1, 0)
"""Odds of each of ``RUNNER_CHOICES`` per tier: threads start no worker processes."""
TORCHRUN_RUNNER_ODDS = (12, 6, 1)
DOWNSTREAM_RUNNER_ODDS = (1, 1, 4)
"""The downstream's ``runner="process"``, two launches in three (torchrun tier)."""
MTP_CHOICES = ("off", "on")
TORCHRUN_MTP_ODDS = (19, 1)
"""``mtp_mode`` on torchrun only (its child process, like worker processes, needs one)."""
DOWNSTREAM_MTP_ODDS = (1, 2)
TP_CHOICES = (1, 2, 4)
"""Tensor-parallel ranks per DP group (``Phase.tp``), 1 (Zephon's 1D default) first; powers of
two, as trainers' TP degrees are (Zephon warns of any other ``world / dp_degree``)."""
TP_ODDS = (6, 3, 1)
DOWNSTREAM_TP_ODDS = (1, 4, 1)
"""The downstream's DP x TP with tp 2, two launches in three (torchrun tier)."""
STORE_FAULT_AGGREGATIONS = STORE_AGGREGATIONS
STORE_FAULT_AGGREGATION_ODDS = (3, 2, 1)
"""Odds of each of ``AGGREGATION_CHOICES`` with link faults on: mostly through a store (what
they act on); ``dir`` still, for its round-point rank faults (a link fault there is dropped)."""
"""With store faults: torchrun's store, or (one in four) the one the harness hosts."""
MAPPING_CHOICES = ("contiguous", "interleaved")
AGGREGATION_CHOICES = ("store", "store_explicit", "dir")
AGGREGATION_ODDS = (1, 1, 1)
DOWNSTREAM_AGGREGATION_ODDS = (4, 1, 1)
PERSIST_FORMATS = ("pickle", "json", "torch", "plain_json", "dcp")
INPROC_PERSIST_ODDS = (1, 1, 1, 1, 0)
"""``dcp`` saves and loads on every rank together over a process group: threads have none."""
TORCHRUN_PERSIST_ODDS = (1, 1, 1, 1, 1)
DOWNSTREAM_PERSIST_ODDS = (1, 1, 1, 1, 4)
STORE_FAULT_PERSIST_ODDS = (1, 1, 1, 1, 0)
"""No ``dcp`` beside link faults: after a split checkpoint outcome the ranks that got one
would block in DCP's collective save, which the fault oracles' verdicts do not model."""
SERIALIZER_CHOICES = AGGREGATE_SERIALIZERS
COMPRESSOR_CHOICES = AGGREGATE_COMPRESSORS
CODEC_ODDS = (3, 1)
"""Zephon's default codec three times in four; values from ``validation.values``."""
AGGREGATE_TIMEOUTS_S = (30.0, 180.0)
"""The spec's default, then Zephon's. Shorter ones belong to link-fault scenarios (which
set their own): a round can wait that long for a rank whose worker processes still start."""
PREFETCH_CHOICES = (None, 0, 1, 32)
"""``prefetch_batches``: Zephon's derived depth, none, one, deeper than derived here."""
PREFETCH_ODDS = (3, 3, 1, 3)
"""A depth of one costs each pipeline about a second at its end (Zephon's buffering producer
waits out its 1 s ``put`` timeout on a full queue of one: ``_internal/utils/buffering.py``),
five launches and a reference run six seconds: drawn 1 time in 10 to keep the search's rate."""
SHUTDOWN_CHOICES = SHUTDOWN_MODES
SHUTDOWN_ODDS = (3, 1)
RUN_ID_POLICIES = ("fixed", "per_launch")
DATA_KINDS = ("memory", "jsonl")
EXHAUSTION_CHOICES = ("repeat", "stop")
EXHAUSTION_ODDS = (3, 1)


@cache
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Cached: building and validating strategies per draw would dominate generation time."""
    return st.integers(lo, hi)


@cache
def _one_of(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


@cache
def _weighted(options: tuple[str, ...], weights: tuple[int, ...]) -> st.SearchStrategy[str]:
    """``options[k]`` with odds ``weights[k]``, shrinking to ``options[0]``."""
    cuts: list[tuple[int, str]] = []
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
_HOSTED_FAULT = _weighted(("none", "fault"), (3, 1))

_LINK_FAULT = _weighted(("none", "fault"), (1, 2))
"""A link fault in a launch that can take one? Twice in three: the point of ``store_faults``."""
_MORE = _weighted(("stop", "more"), (1, 3))
"""Another launch? Three times in four: most scenarios resume, yet shrinking stops early."""


def _source(draw: st.DrawFn, name: str, chunk_size: int) -> SourceSpec:
    """A few small shards holding at least one chunk (Zephon refuses less at the first batch)."""
    exhausted = draw(_weighted(EXHAUSTION_CHOICES, EXHAUSTION_ODDS))
    shards = [draw(_ints(8, 40)) for _ in range(draw(_ints(1, 3)))]
    if sum(shards) < chunk_size:
        shards[0] += chunk_size - sum(shards)
    return SourceSpec(
        name=name,
        shards=tuple(shards),
        weight=draw(_one_of((1.0, 0.5, 0.25))),
        kind=draw(_one_of(DATA_KINDS)),
        exhausted=exhausted,  # type: ignore[arg-type]
    )


def _data(draw: st.DrawFn) -> DataSpec:
    chunk_size = draw(_one_of((4, 16, 8)))
    count = draw(_ints(1, 2))
    return DataSpec(
        sources=tuple(_source(draw, chr(ord("a") + i), chunk_size) for i in range(count)),
        seed=draw(_ints(0, 3)),
        chunk_size=chunk_size,
        shuffle=draw(_one_of((True, False))),
        microbatch=draw(_ints(1, 4)),
    )


@st.composite
def data_specs(draw: st.DrawFn) -> DataSpec:
    """One or two sources of a few small shards, in memory or jsonl, endless or finite."""
    return _data(draw)


@cache
def pipeline_specs(
    tier: Tier, max_c: int, store_only: bool = False, profile: Profile = "default"
) -> st.SearchStrategy[PipelineSpec]:
    """C, mapping, runner, ``mtp_mode``, aggregation and Zephon's options on that path (codec,
    timeout, prefetch depth, shutdown mode), each shrinking to its default; worker processes
    only on torchrun; ``store_only``: aggregation through a store (torchrun's or the harness's:
    what link faults act on); ``profile``: see ``PROFILES``."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    downstream = profile == "downstream"
    if tier == "inproc":
        runner_odds = INPROC_RUNNER_ODDS
    else:
        runner_odds = DOWNSTREAM_RUNNER_ODDS if downstream else TORCHRUN_RUNNER_ODDS
    mtp_odds = DOWNSTREAM_MTP_ODDS if downstream else TORCHRUN_MTP_ODDS
    mtp = (
        st.just(False)
        if tier == "inproc"
        else _weighted(MTP_CHOICES, mtp_odds).map(lambda v: v == "on")
    )
    agg_odds = DOWNSTREAM_AGGREGATION_ODDS if downstream else AGGREGATION_ODDS
    return st.builds(
        PipelineSpec,
        canonical_replicas=st.integers(1, max_c),
        mapping=st.sampled_from(MAPPING_CHOICES),
        runner=_weighted(RUNNER_CHOICES, runner_odds),
        mtp_mode=mtp,
        aggregation=_weighted(
            AGGREGATION_CHOICES, STORE_FAULT_AGGREGATION_ODDS if store_only else agg_odds
        ),
        aggregate_timeout_s=_one_of(AGGREGATE_TIMEOUTS_S),
        aggregate_serializer=_weighted(SERIALIZER_CHOICES, CODEC_ODDS),
        aggregate_compressor=_weighted(COMPRESSOR_CHOICES, CODEC_ODDS),
        prefetch_batches=_weighted(PREFETCH_CHOICES, PREFETCH_ODDS),  # type: ignore[arg-type]
        shutdown_mode=_weighted(SHUTDOWN_CHOICES, SHUTDOWN_ODDS),
    )


def persist_odds(tier: Tier, store_faults: bool, profile: Profile) -> tuple[int, ...]:
    """Odds of each of ``PERSIST_FORMATS`` for a tier, link faults or not, and a profile."""
    if tier == "inproc":
        return INPROC_PERSIST_ODDS
    if store_faults:
        return STORE_FAULT_PERSIST_ODDS
    return DOWNSTREAM_PERSIST_ODDS if profile == "downstream" else TORCHRUN_PERSIST_ODDS


def tp_odds(tier: Tier, profile: Profile) -> tuple[int, ...]:
    """Odds of each of ``TP_CHOICES`` for a tier and a profile."""
    return DOWNSTREAM_TP_ODDS if profile == "downstream" and tier == "torchrun" else TP_ODDS


def _phase(
    draw: st.DrawFn,
    *,
    tier: Tier,
    pipeline: PipelineSpec,
    max_world: int,
    max_steps: int,
    faults: bool,
    store_faults: bool = False,
) -> Phase:
    c, mapping = pipeline.canonical_replicas, pipeline.mapping
    # Every choice is drawn whatever the earlier ones were, so that shrinking one value
    # (C, a world size, the data) does not shift the meaning of all the choices after it.
    world = draw(_ints(1, max_world))
    launch = LAUNCH_CHOICES[0] if tier == "inproc" else draw(_one_of(LAUNCH_CHOICES))
    steps = draw(_ints(1, max_steps))
    max_extra = max(lanes_per_rank(min(world, c), c, mapping)) - 1
    wanted = []
    for _ in range(draw(_ints(0, 2))):
        # Any step, 0 (before the first batch) included; mid-window when ``extra`` > 0.
        step = draw(_ints(0, steps))
        extra = draw(_ints(0, max_extra))
        wanted.append(CheckpointAt(step, extra if step < steps else 0))
    link_faults, retry = _store_faults(draw, world, tier) if store_faults else ((), "none")
    drawn_faults: list[RankFault] = []
    if faults:
        actions = THREAD_FAULTS if tier == "inproc" else ROUND_FAULTS
        for _ in range(draw(_ints(0, 1))):
            fault = RankFault(
                rank=draw(_ints(0, world - 1)),
                at_step=draw(_ints(0, steps)),
                action=draw(_one_of(actions)),
            )
            # Any rank and round: normalising moves it to one that writes the point.
            point, n = draw(_one_of(RANK_FAULT_POINTS)), draw(_one_of(ROUND_NUMBERS))
            fault_retry = draw(_one_of(RETRIES))
            if point != AT_STEP:
                fault = replace(fault, at=point if n == 1 else f"{point}#{n}")
                retry = retry if link_faults else fault_retry
            drawn_faults.append(fault)
    hosted: tuple[StoreFault, ...] = ()
    restarts = 0
    if faults and tier == "torchrun":
        # Drawn whatever the launch is: normalising keeps them where the rules allow.
        if draw(_HOSTED_FAULT) == "fault":
            action = draw(_one_of(HOSTED_STORE_ACTIONS))
            point = draw(_one_of(HOSTED_STORE_POINTS))
            n = draw(_one_of(HOSTED_STORE_ROUNDS))
            stall = draw(_one_of(STALLS_S))
            at = point if n == 1 else f"{point}#{n}"
            hosted = (StoreFault(action, at, stall if action == "sigstop" else 1.0),)
        restarts = int(draw(_weighted(tuple(map(str, RESTART_CHOICES)), RESTART_ODDS)))
    # Drawn as is: ``scenario_rules.normalised`` makes the scenario obey the rules (a launch
    # with more ranks than lanes becomes a refusal, a link fault no round can time goes, a
    # tp that does not divide the world is lowered).
    return Phase(
        world_size=world,
        steps=steps,
        checkpoints=tuple(wanted),
        launch=launch,  # type: ignore[arg-type]
        rank_faults=tuple(drawn_faults),
        proxy_faults=link_faults,
        store_faults=hosted,
        max_restarts=restarts,
        retry=retry,
    )


def _store_faults(draw: st.DrawFn, world: int, tier: Tier) -> tuple[tuple[ProxyFault, ...], Retry]:
    """At most one fault on one rank's store link, and the retry policy of the launch.

    Drawn whether or not the phase can use them, so that shrinking the phase keeps the
    meaning of every later choice."""
    if draw(_LINK_FAULT) == "none":
        return (), "none"
    toxic = draw(_one_of(THREAD_TOXICS if tier == "inproc" else STORE_TOXICS))
    at = draw(_one_of(("start", *ROUND_PHASES)))
    # Any rank: normalising moves it to one that writes the point (rank 0 for the leader's).
    rank = draw(_ints(0, 3)) % max(1, world)
    latency = draw(_one_of(LATENCIES_MS)) if toxic == "latency" else 0
    attributes = link_attributes(toxic, latency)
    retry = draw(_one_of(RETRIES))
    return (ProxyFault(rank=rank, toxic=toxic, attributes=attributes, at=at),), retry


AIM_CHOICES = ("free", "aimed")
AIM_ODDS = (1, 1)
"""With aims, free and aimed scenarios (``zephon_chaos.aims``); the explorer aims whole
rounds (``explore.config.AIMED_ODDS``) and shares its time between them and plain ones."""
MORE_AIM_ODDS = (1, 3)
"""Each other launch of an aimed scenario: aimed as well, three times in four (more cells a
scenario: its reference run and start are paid once)."""


def _aim(
    draw: st.DrawFn, scenario: Scenario, aims: tuple[Aim, ...], odds: tuple[int, int]
) -> Scenario:
    """``scenario`` with one launch (drawn) aimed at one of ``aims``, and each other launch,
    three times in four, at one of the aims of the same aggregation (one pipeline serves all).
    A setting aim (``mtp_mode``, a process runner) or a layout aim is the scenario's only one."""
    if draw(_weighted(AIM_CHOICES, odds)) == AIM_CHOICES[0]:
        return scenario
    first = _one_aim(draw, aims)
    if first.kind in WHOLE_SCENARIO_AIMS:
        return aimed(scenario, 0, first, Draws(rank=draw(_ints(0, 3))))
    same = tuple(
        a for a in aims if a.aggregation == first.aggregation and a.kind not in WHOLE_SCENARIO_AIMS
    )
    where = draw(_ints(0, len(scenario.phases) - 1))
    for i in range(len(scenario.phases)):
        aim: Aim | None = first
        if i != where:
            more = draw(_weighted(AIM_CHOICES, MORE_AIM_ODDS)) != AIM_CHOICES[0]
            aim = _one_aim(draw, same) if more else None
        draws = Draws(
            rank=draw(_ints(0, 3)),
            latency_ms=draw(_one_of(LATENCIES_MS)),
            stall_s=draw(_one_of(STALLS_S)),
        )
        if aim is not None:
            scenario = aimed(scenario, i, aim, draws)
    return scenario


WHOLE_SCENARIO_AIMS = (AimKind.SETTING, AimKind.LAYOUT)
"""Aims that set the scenario's pipeline or its launches' layouts, not one launch's fault."""


def _one_aim(draw: st.DrawFn, aims: tuple[Aim, ...]) -> Aim:
    """A group of ``aims`` evenly (``Aim.group``), then one of its aims."""
    groups = tuple(dict.fromkeys(a.group for a in aims))
    group = draw(st.sampled_from(groups))
    return draw(st.sampled_from(tuple(a for a in aims if a.group == group)))


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


def _arrival(draw: st.DrawFn, phase: Phase, *, lags: bool = True) -> Phase:
    """``phase`` with how its ranks arrive: in lockstep, or free-running with (one time in
    two) a deliberate lag (``RankLag``: late by construction, a fault: only with ``lags``)
    and the policy after it.

    Drawn whatever the phase, so shrinking it keeps the meaning of these choices; normalising
    drops a lag the launch cannot carry (one rank, no such checkpoint, another fault)."""
    sync = draw(_weighted(SYNC_CHOICES, SYNC_ODDS))
    lagged = draw(_one_of(LAG_CHOICES)) == "lag"
    rank = draw(_ints(0, 3)) % max(1, phase.world_size)
    index = draw(_one_of(LAG_INDICES))
    retry = draw(_one_of(LAG_RETRIES))
    if sync != "free" or not (lagged and lags) or phase.proxy_faults or phase.rank_faults:
        return replace(phase, sync=sync)  # type: ignore[arg-type]
    lag = RankLag(rank, checkpoint=index)
    return replace(phase, sync=sync, lags=(lag,), retry=retry)  # type: ignore[arg-type]


def settled(scenario: Scenario) -> Scenario:
    """``scenario`` made to obey the scenario rules (``scenario_rules.normalised``): what the
    strategies apply to every draw, for scenarios edited after generation (polishing)."""
    return normalised(scenario)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    tier: Tier = "inproc",
    max_world: int = 4,
    max_phases: int = 5,
    max_steps: int = 4,
    faults: bool = True,
    plant: str | None = None,
    store_faults: bool = False,
    profile: Profile = "default",
    aims: tuple[Aim, ...] = (),
    aim_odds: tuple[int, int] = AIM_ODDS,
) -> Scenario:
    """A valid scenario for ``tier``; ``plant`` makes every one carry that deliberate defect;
    ``store_faults`` adds faults on the ranks' links to the store (each rank's client reaches
    it through a proxy of its own; on the in-process tier no stalling link, ``THREAD_TOXICS``);
    ``profile`` sets the odds of the pipeline and persistence (see ``PROFILES``); ``aims``:
    fault cells to land in (``zephon_chaos.aims``), with ``aim_odds`` (free, aimed)."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    if max_world < 1 or not 1 <= max_phases <= 5:
        raise ValueError("max_world must be at least 1 and max_phases within 1..5")
    # Launches come last: shrinking their count then cuts the tail of the choices and leaves
    # the meaning of everything drawn before unchanged.
    pipeline = draw(
        pipeline_specs(tier, max_c=2 * max_world, store_only=store_faults, profile=profile)
    )
    data = _data(draw)
    persist_format = draw(_weighted(PERSIST_FORMATS, persist_odds(tier, store_faults, profile)))
    run_id_policy = draw(_one_of(RUN_ID_POLICIES))
    # A list of launches, as Hypothesis draws lists: "one more?" before each after the
    # first, so the shrinker can delete any launch, not only the last.
    drawn: list[Phase] = []
    while True:
        drawn.append(
            _phase(
                draw,
                tier=tier,
                pipeline=pipeline,
                max_world=max_world,
                max_steps=max_steps,
                faults=faults,
                store_faults=store_faults,
            )
        )
        if tier == "torchrun":
            drawn[-1] = _arrival(draw, drawn[-1], lags=faults)
        if len(drawn) >= max_phases or draw(_MORE) == "stop":
            break
    # Each launch's tp, drawn after all launches (whose own choices they would shift), always
    # max_phases of them and aligned on the last launch: deleting a launch while shrinking
    # leaves every other's layout in place, and each shrinks to 1 on its own.
    tps = _weighted(tuple(str(t) for t in TP_CHOICES), tp_odds(tier, profile))
    layouts = [int(draw(tps)) for _ in range(max_phases)]
    drawn = [replace(ph, tp=t) for ph, t in zip(drawn, layouts[-len(drawn) :], strict=True)]
    scenario = Scenario(
        data=data,
        pipeline=pipeline,
        phases=tuple(drawn),
        persist_format=persist_format,
        run_id_policy=run_id_policy,  # type: ignore[arg-type]
        plant=plant,
        name="generated",
    )
    # Aims last: every choice above keeps its meaning, and "free" shrinks the aims away.
    scenario = normalised(_aim(draw, scenario, aims, aim_odds) if aims else scenario)
    # Faults normalising left in place (link, round-point rank and store faults) fail their
    # rounds in seconds, and a lagged round waits out its budget: all take the short one.
    if any(
        ph.proxy_faults or ph.store_faults or ph.lags or any(f.at_round for f in ph.rank_faults)
        for ph in scenario.phases
    ):
        scenario = scenario.with_(
            pipeline=replace(scenario.pipeline, aggregate_timeout_s=STORE_FAULT_TIMEOUT_S)
        )
    return scenario.validate()
