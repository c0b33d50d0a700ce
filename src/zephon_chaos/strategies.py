"""Hypothesis strategies for scenarios: the whole space users reach, shrinking to the simplest.

Trajectories of 1-5 launches over world sizes 1..max (same size again, growth, shrink, G not
dividing C, G > C, which Zephon must refuse), checkpoints at any step (step 0 before the
first batch, mid-window, after the data ran out), every persistence format, aggregation mode
and runner, relaunches after a crash from the same checkpoint with the same run_id, rank
fault schedules and (``store_faults``, torchrun tier) faults on a rank's link to the
aggregation store at a logical point of a checkpoint round, with the retry policy the
workload follows after a failed checkpoint.

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

from zephon_chaos.lanes import lanes_of
from zephon_chaos.scenario import Phase, ProxyFault, Scenario
from zephon_chaos.workload.spec import (
    RETRIES,
    ROUND_PHASES,
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    Retry,
    SourceSpec,
)

Tier = Literal["inproc", "torchrun"]
TIERS: tuple[Tier, ...] = ("inproc", "torchrun")
REFUSAL_ERROR = "must be >= dp_degree"
"""What Zephon says when a launch has more ranks than canonical lanes (G > C)."""
RUN_DRY_STEPS = 10_000
"""Steps of a last phase over finite data: more than any dataset here holds, so it runs dry."""
THREAD_FAULTS = ("raise",)
PROCESS_FAULTS = ("raise", "exit", "sigkill", "sigterm")
"""Simplest first. ``sigstop`` (a hang) and ``kill_agent`` are left to targeted tests."""
STORE_TOXICS = ("latency", "down", "reset_peer")
"""Link faults, simplest first: a slow link, a link that is gone, a connection reset. The
``timeout`` toxic (a link that stalls) is left out: it hangs any lockstep checkpoint to the
launch deadline, a known Zephon defect pinned by a strict xfail in test_faults_store.py."""
LATENCIES_MS = (10, 50, 200)
LEADER_PHASES = ("announce", "outcome")
FOLLOWER_PHASES = ("ack",)
STORE_FAULT_TIMEOUT_S = 2.0
"""``aggregate_timeout_s`` of a scenario with link faults: a failing round ends in seconds."""
LAUNCH_CHOICES = ("standalone", "static", "c10d")
"""Launch paths a torchrun launch draws; threads have only the first."""
RUNNER_CHOICES = ("inline", "threads", "process")
INPROC_RUNNER_ODDS = (2, 1, 0)
"""Odds of each of ``RUNNER_CHOICES`` per tier: threads start no worker processes."""
TORCHRUN_RUNNER_ODDS = (12, 6, 1)
MTP_CHOICES = ("off", "on")
TORCHRUN_MTP_ODDS = (19, 1)
"""``mtp_mode`` on torchrun only (its child process, like worker processes, needs one)."""
MAPPING_CHOICES = ("contiguous", "interleaved")
AGGREGATION_CHOICES = ("store", "store_explicit", "dir")
PERSIST_FORMATS = ("pickle", "json", "torch")
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
    tier: Tier, max_c: int, store_only: bool = False
) -> st.SearchStrategy[PipelineSpec]:
    """C, mapping, runner, ``mtp_mode`` and aggregation; worker processes only on torchrun;
    ``store_only``: aggregation through torchrun's store (what link faults act on)."""
    runners = _weighted(
        RUNNER_CHOICES, INPROC_RUNNER_ODDS if tier == "inproc" else TORCHRUN_RUNNER_ODDS
    )
    mtp = (
        st.just(False)
        if tier == "inproc"
        else _weighted(MTP_CHOICES, TORCHRUN_MTP_ODDS).map(lambda v: v == "on")
    )
    return st.builds(
        PipelineSpec,
        canonical_replicas=st.integers(1, max_c),
        mapping=st.sampled_from(MAPPING_CHOICES),
        runner=runners,
        mtp_mode=mtp,
        aggregation=st.just("store")
        if store_only
        else st.sampled_from(AGGREGATION_CHOICES),
    )


def lanes_per_rank(world_size: int, canonical_replicas: int, mapping: str) -> list[int]:
    return [
        max(1, len(lanes_of(r, world_size, canonical_replicas, mapping))) for r in range(world_size)
    ]


def collective(
    checkpoints: list[CheckpointAt], world_size: int, canonical_replicas: int, mapping: str
) -> tuple[CheckpointAt, ...]:
    """Drop checkpoints that fall on the same batch as an earlier one on some rank.

    Such a pair would make ranks checkpoint a different number of times (the scenario model
    refuses it); dropping rather than filtering keeps shrinking smooth.
    """
    per = lanes_per_rank(world_size, canonical_replicas, mapping)
    kept: list[CheckpointAt] = []
    seen: list[set[int]] = [set() for _ in per]
    for c in sorted(set(checkpoints), key=lambda c: (c.step, c.extra)):
        marks = [c.step * p + min(c.extra, p) for p in per]
        if any(m in s for m, s in zip(marks, seen, strict=True)):
            continue
        for m, s in zip(marks, seen, strict=True):
            s.add(m)
        kept.append(c)
    return tuple(kept)


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
    link_faults, retry = _store_faults(draw, world) if store_faults else ((), "none")
    drawn_faults: list[RankFault] = []
    if faults:
        actions = THREAD_FAULTS if tier == "inproc" else PROCESS_FAULTS
        for _ in range(draw(_ints(0, 1))):
            drawn_faults.append(
                RankFault(
                    rank=draw(_ints(0, world - 1)),
                    at_step=draw(_ints(0, steps)),
                    action=draw(_one_of(actions)),
                )
            )
    if world > c:
        return Phase(
            world_size=world,
            steps=1,
            launch=launch,  # type: ignore[arg-type]
            expect_failure=True,
            expect_error=REFUSAL_ERROR,
        )
    checkpoints = collective(wanted, world, c, mapping)
    if (
        world < 2
        or pipeline.aggregation != "store"
        or pipeline.runner == "process"
        or pipeline.mtp_mode
    ):
        # A link fault needs store traffic to act on (one rank never contacts the store) and
        # the round written by the rank's own process, where its interposer is (worker
        # processes and the MTP child write their own).
        link_faults, retry = (), "none"
    if link_faults:
        drawn_faults = []  # with a crash as well, neither verdict would be clear
    return Phase(
        world_size=world,
        steps=steps,
        checkpoints=checkpoints,
        launch=launch,  # type: ignore[arg-type]
        rank_faults=tuple(drawn_faults),
        proxy_faults=link_faults,
        retry=retry,
    )


def _store_faults(draw: st.DrawFn, world: int) -> tuple[tuple[ProxyFault, ...], Retry]:
    """At most one fault on one rank's store link, and the retry policy of the launch.

    Drawn whether or not the phase can use them, so that shrinking the phase keeps the
    meaning of every later choice."""
    if draw(_LINK_FAULT) == "none":
        return (), "none"
    toxic = draw(_one_of(STORE_TOXICS))
    at = draw(_one_of(("start", *ROUND_PHASES)))
    rank = draw(_ints(0, 3)) % max(1, world)
    attributes = {"latency": draw(_one_of(LATENCIES_MS))} if toxic == "latency" else {}
    if toxic == "reset_peer":
        attributes = {"timeout": 0}
        at = at if at != "start" else ROUND_PHASES[0]  # a reset at start resets nothing
    if at in LEADER_PHASES:
        rank = 0  # only the leader (global rank 0) announces a round and publishes its outcome
    elif at in FOLLOWER_PHASES:
        rank = 1 + rank % max(1, world - 1)  # only followers acknowledge
    retry = draw(_one_of(RETRIES))
    return (ProxyFault(rank=rank, toxic=toxic, attributes=attributes, at=at),), retry


def settled(scenario: Scenario) -> Scenario:
    """``scenario`` with the rules that depend on a launch's place applied again (see
    ``_settle``): for scenarios edited after generation, such as the explorer's polishing."""
    finite = any(src.exhausted == "stop" for src in scenario.data.sources)
    return scenario.with_(phases=_settle(list(scenario.phases), finite))


def _settle(phases: list[Phase], finite: bool) -> tuple[Phase, ...]:
    """What depends on a phase's place: a launch followed by another checkpoints (at its end
    if it drew no checkpoint); over finite data the last one runs dry and none has faults (a
    rank whose data ran out never reaches its fault); a restored launch that checkpoints
    before its first batch has no link faults."""
    out = []
    for i, ph in enumerate(phases):
        if ph.expect_failure:
            out.append(ph)
            continue
        last = i == len(phases) - 1
        if finite:
            ph = replace(ph, rank_faults=())
        if not last and not ph.checkpoints and not ph.rank_faults:
            ph = replace(ph, checkpoints=(CheckpointAt(ph.steps),))
        if not ph.checkpoints or (i > 0 and CheckpointAt(0) in ph.checkpoints):
            # A link fault is timed by a round: none without a checkpoint, and none when a
            # restored launch checkpoints before its first batch (a known Zephon defect).
            ph = replace(ph, proxy_faults=(), retry="none")
        if last and finite:
            ph = replace(ph, steps=RUN_DRY_STEPS)
        out.append(ph)
    return tuple(out)


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
) -> Scenario:
    """A valid scenario for ``tier``; ``plant`` makes every one carry that deliberate defect;
    ``store_faults`` (torchrun only) adds faults on the ranks' links to the store."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    if store_faults and tier != "torchrun":
        raise ValueError("store_faults need the torchrun tier: the fault proxy sits between "
                         "processes and the store")
    if max_world < 1 or not 1 <= max_phases <= 5:
        raise ValueError("max_world must be at least 1 and max_phases within 1..5")
    # Launches come last: shrinking their count then cuts the tail of the choices and leaves
    # the meaning of everything drawn before unchanged.
    pipeline = draw(pipeline_specs(tier, max_c=2 * max_world, store_only=store_faults))
    data = _data(draw)
    persist_format = draw(_one_of(PERSIST_FORMATS))
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
        if len(drawn) >= max_phases or draw(_MORE) == "stop":
            break
    scenario = settled(
        Scenario(
            data=data,
            pipeline=pipeline,
            phases=tuple(drawn),
            persist_format=persist_format,
            run_id_policy=run_id_policy,  # type: ignore[arg-type]
            plant=plant,
            name="generated",
        )
    )
    if any(ph.proxy_faults for ph in scenario.phases):  # those settling left in place
        scenario = scenario.with_(
            pipeline=replace(pipeline, aggregate_timeout_s=STORE_FAULT_TIMEOUT_S)
        )
    return scenario.validate()
