"""The scenario strategy itself: data, pipelines, launches, faults, then aims; see the
package's docstring for the space and how it shrinks."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from hypothesis import strategies as st

from zephon_chaos.aims import Aim, link_attributes
from zephon_chaos.deployment import Deployment
from zephon_chaos.dimensions.settings import Options, Setting, setting_of, settings_of
from zephon_chaos.scenario import Launch, ProxyFault, Scenario, StoreFault
from zephon_chaos.scenario_rules import (
    lanes_per_rank,
    normalised,
)
from zephon_chaos.strategies.aiming import AIM_ODDS, aim
from zephon_chaos.strategies.arrival import arrival
from zephon_chaos.strategies.values import (
    CHILD_FAULT_DRAW,
    DATA_KINDS,
    DOWNSTREAM_PACK_ODDS,
    DOWNSTREAM_SHUFFLE_ODDS,
    DOWNSTREAM_STAGE_ODDS,
    DOWNSTREAM_TP_ODDS,
    DROP_CHOICES,
    EXHAUSTION_CHOICES,
    EXHAUSTION_ODDS,
    HEALING_TOXICS,
    HOSTED_FAULT_DRAW,
    HOSTED_STORE_ACTIONS,
    HOSTED_STORE_POINTS,
    HOSTED_STORE_ROUNDS,
    LATENCIES_MS,
    LAUNCH_CHOICES,
    LINK_FAULT_DRAW,
    LINK_HEAL_DRAW,
    MORE_LAUNCHES,
    PACK_BINS,
    PACK_LENGTHS,
    PACK_ODDS,
    PACKINGS,
    PROFILES,
    RANK_FAULT_POINTS,
    RESTART_CHOICES,
    RESTART_ODDS,
    ROUND_FAULTS,
    ROUND_NUMBERS,
    SHUFFLE_BUFFERS,
    SHUFFLE_ODDS,
    SHUFFLES,
    STAGE_ODDS,
    STALLS_S,
    STORE_FAULT_TIMEOUT_S,
    STORE_TOXICS,
    THREAD_FAULTS,
    THREAD_TOXICS,
    TIERS,
    TOKEN_CHOICES,
    TP_CHOICES,
    TP_ODDS,
    Profile,
    Tier,
    ints,
    one_of,
    weighted,
)
from zephon_chaos.workload.spec import (
    AT_STEP,
    RETRIES,
    ROUND_PHASES,
    CheckpointAt,
    ChildFault,
    DataSpec,
    PipelineSpec,
    RankFault,
    Retry,
    SourceSpec,
    StagesSpec,
)


def _source(draw: st.DrawFn, name: str, chunk_size: int) -> SourceSpec:
    """A few small shards holding at least one chunk (Zephon refuses less at the first batch)."""
    exhausted = draw(weighted(EXHAUSTION_CHOICES, EXHAUSTION_ODDS))
    shards = [draw(ints(8, 40)) for _ in range(draw(ints(1, 3)))]
    if sum(shards) < chunk_size:
        shards[0] += chunk_size - sum(shards)
    return SourceSpec(
        name=name,
        shards=tuple(shards),
        weight=draw(one_of((1.0, 0.5, 0.25))),
        kind=draw(one_of(DATA_KINDS)),
        exhausted=exhausted,  # type: ignore[arg-type]
    )


def _stages(draw: st.DrawFn, profile: Profile) -> StagesSpec:
    """tokenize -> pack -> shuffle, each drawn on its own and shrinking to off; a pack needs
    the tokens, so the stand-in tokenizer is on whenever anything is."""
    downstream = profile == "downstream"
    odds = DOWNSTREAM_STAGE_ODDS if downstream else STAGE_ODDS
    if draw(weighted(("none", "stages"), odds)) == "none":
        return StagesSpec()
    pack = draw(weighted(PACKINGS, DOWNSTREAM_PACK_ODDS if downstream else PACK_ODDS))
    shuffle = draw(weighted(SHUFFLES, DOWNSTREAM_SHUFFLE_ODDS if downstream else SHUFFLE_ODDS))
    return StagesSpec(
        tokens=draw(one_of(TOKEN_CHOICES)),
        drop_every=draw(one_of(DROP_CHOICES)),
        pack=pack,
        pack_length=draw(one_of(PACK_LENGTHS)),
        pack_bins=draw(one_of(PACK_BINS)),
        shuffle=shuffle,
        shuffle_buffer=draw(one_of(SHUFFLE_BUFFERS)),
        shuffle_seed=draw(ints(0, 3)),
    )


def _data(draw: st.DrawFn, profile: Profile = "default") -> DataSpec:
    chunk_size = draw(one_of((4, 16, 8)))
    count = draw(ints(1, 2))
    data = DataSpec(
        sources=tuple(_source(draw, chr(ord("a") + i), chunk_size) for i in range(count)),
        seed=draw(ints(0, 3)),
        chunk_size=chunk_size,
        shuffle=draw(one_of((True, False))),
        microbatch=draw(ints(1, 4)),
        stages=_stages(draw, profile),
    )
    return _fed_for_packing(data)


def _fed_for_packing(data: DataSpec) -> DataSpec:
    """Finite sources grown by the rows a bin holds on average: a packed batch takes several
    rows a bin, and a source sized for plain batches would end before a lane filled one,
    leaving nothing to compare."""
    st_ = data.stages
    if st_.pack == "none":
        return data
    per_bin = max(1, st_.pack_length * 2 // (st_.tokens + 1))  # mean tokens (n + 1) / 2
    sources = tuple(
        replace(src, shards=tuple(n * per_bin for n in src.shards))
        if src.exhausted == "stop"
        else src
        for src in data.sources
    )
    return replace(data, sources=sources)


@st.composite
def data_specs(draw: st.DrawFn) -> DataSpec:
    """One or two sources of a few small shards, in memory or jsonl, endless or finite, with
    or without stages before the batch."""
    return _data(draw)


@cache
def pipeline_specs(
    tier: Tier, max_c: int, store_only: bool = False, profile: Profile = "default"
) -> st.SearchStrategy[PipelineSpec]:
    """C, then the pipeline's settings (``dimensions.settings``: mapping, runner,
    ``mtp_mode``, aggregation and Zephon's options on that path), each shrinking to its
    default; ``store_only``: the odds of a run with link faults (aggregation through a store,
    torchrun's or the harness's: what link faults act on); ``profile``: see ``PROFILES``."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    o = Options(tier=tier, profile=profile, store_faults=store_only)
    drawn = {s.field: setting_draw(s, o) for s in settings_of("pipeline")}
    return st.builds(PipelineSpec, canonical_replicas=st.integers(1, max_c), **drawn)


def setting_draw(setting: Setting, o: Options) -> st.SearchStrategy[Any]:
    """One of ``setting``'s values by its odds for ``o``, shrinking to the first; the one value
    with odds, without a draw."""
    odds = setting.odds.of(o)
    if odds is None:
        return one_of(setting.values)
    live = [v for v, odd in zip(setting.values, odds, strict=True) if odd > 0]
    return st.just(live[0]) if len(live) == 1 else weighted(setting.values, odds)


def persist_odds(tier: Tier, store_faults: bool, profile: Profile) -> tuple[int, ...]:
    """Odds of each of ``PERSIST_FORMATS`` for a tier, link faults or not, and a profile."""
    o = Options(tier=tier, profile=profile, store_faults=store_faults)
    return setting_of("persist_format").odds.of(o) or ()


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
) -> Launch:
    c, mapping = pipeline.canonical_replicas, pipeline.mapping
    # Every choice is drawn whatever the earlier ones were, so that shrinking one value
    # (C, a world size, the data) does not shift the meaning of all the choices after it.
    world = draw(ints(1, max_world))
    launch = LAUNCH_CHOICES[0] if tier == "inproc" else draw(one_of(LAUNCH_CHOICES))
    steps = draw(ints(1, max_steps))
    max_extra = max(lanes_per_rank(min(world, c), c, mapping)) - 1
    wanted = []
    for _ in range(draw(ints(0, 2))):
        # Any step, 0 (before the first batch) included; mid-window when ``extra`` > 0.
        step = draw(ints(0, steps))
        extra = draw(ints(0, max_extra))
        wanted.append(CheckpointAt(step, extra if step < steps else 0))
    link_faults, retry = _store_faults(draw, world, tier) if store_faults else ((), "none")
    drawn_faults: list[RankFault] = []
    if faults:
        actions = THREAD_FAULTS if tier == "inproc" else ROUND_FAULTS
        for _ in range(draw(ints(0, 1))):
            fault = RankFault(
                rank=draw(ints(0, world - 1)),
                at_step=draw(ints(0, steps)),
                action=draw(one_of(actions)),
            )
            # Any rank and round: normalising moves it to one that writes the point.
            point, n = draw(one_of(RANK_FAULT_POINTS)), draw(one_of(ROUND_NUMBERS))
            fault_retry = draw(one_of(RETRIES))
            if point != AT_STEP:
                fault = replace(fault, at=point if n == 1 else f"{point}#{n}")
                retry = retry if link_faults else fault_retry
            drawn_faults.append(fault)
    hosted: tuple[StoreFault, ...] = ()
    children: tuple[ChildFault, ...] = ()
    restarts = 0
    if faults and tier == "torchrun":
        # Drawn whatever the launch is: normalising keeps them where the rules allow.
        if draw(HOSTED_FAULT_DRAW) == "fault":
            action = draw(one_of(HOSTED_STORE_ACTIONS))
            point = draw(one_of(HOSTED_STORE_POINTS))
            n = draw(one_of(HOSTED_STORE_ROUNDS))
            stall = draw(one_of(STALLS_S))
            at = point if n == 1 else f"{point}#{n}"
            hosted = (StoreFault(action, at, stall if action == "sigstop" else 1.0),)
        restarts = int(draw(weighted(tuple(map(str, RESTART_CHOICES)), RESTART_ODDS)))
        target = draw(CHILD_FAULT_DRAW)
        rank, at_step = draw(ints(0, 3)), draw(ints(1, max(1, steps)))
        if target != "none":
            children = (ChildFault(rank=rank, at_step=at_step, target=target),)
    # Drawn as is: ``scenario_rules.normalised`` makes the scenario obey the rules (a launch
    # with more ranks than lanes becomes a refusal, a link fault no round can time goes, a
    # tp that does not divide the world is lowered).
    return Launch(
        world_size=world,
        steps=steps,
        checkpoints=tuple(wanted),
        path=launch,  # type: ignore[arg-type]
        rank_faults=tuple(drawn_faults),
        proxy_faults=link_faults,
        store_faults=hosted,
        child_faults=children,
        max_restarts=restarts,
        retry=retry,
    )


def _store_faults(draw: st.DrawFn, world: int, tier: Tier) -> tuple[tuple[ProxyFault, ...], Retry]:
    """At most one fault on one rank's store link, and the retry policy of the launch.

    Drawn whether or not the phase can use them, so that shrinking the phase keeps the
    meaning of every later choice."""
    if draw(LINK_FAULT_DRAW) == "none":
        return (), "none"
    toxic = draw(one_of(THREAD_TOXICS if tier == "inproc" else STORE_TOXICS))
    at = draw(one_of(("start", *ROUND_PHASES)))
    # Any rank: normalising moves it to one that writes the point (rank 0 for the leader's).
    rank = draw(ints(0, 3)) % max(1, world)
    latency = draw(one_of(LATENCIES_MS)) if toxic == "latency" else 0
    attributes = link_attributes(toxic, latency)
    retry = draw(one_of(RETRIES))
    return (ProxyFault(rank=rank, toxic=toxic, attributes=attributes, at=at),), retry


def healed(draw: st.DrawFn, scenario: Scenario, max_phases: int) -> Scenario:
    """``scenario`` with each launch's healing link faults given an end (``LINK_HEAL_DRAW``).

    ``max_phases`` draws (more where an aim laid out more launches), aligned on the last
    launch (as the launches' tp are): deleting
    a launch while shrinking leaves every other's draw in place, and each shrinks to ``never``.
    Normalising then keeps an end only where the rules allow one (at a round point). A fault
    an aim gave an end keeps it (the draw is still made)."""
    count = max(max_phases, len(scenario.launches))  # an aim may lay out two launches from one
    ends = [draw(LINK_HEAL_DRAW) for _ in range(count)][-len(scenario.launches) :]
    phases = tuple(
        replace(
            ph,
            proxy_faults=tuple(
                replace(f, until=until) if f.toxic in HEALING_TOXICS and not f.heals else f
                for f in ph.proxy_faults
            ),
        )
        for ph, until in zip(scenario.launches, ends, strict=True)
    )
    return scenario.with_(launches=phases)


def settled(scenario: Scenario) -> Scenario:
    """``scenario`` made to obey the scenario rules (``scenario_rules.normalised``): what the
    strategies apply to every draw, for scenarios edited after generation (polishing)."""
    return normalised(scenario)


@st.composite
def deployments(draw: st.DrawFn) -> Deployment:
    """A deployment (``zephon_chaos.deployment``): each of its settings by its odds, shrinking
    to the downstream's default."""
    o = Options()
    return Deployment(**{s.field: draw(setting_draw(s, o)) for s in settings_of("deployment")})


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
    data = _data(draw, profile)
    o = Options(tier=tier, profile=profile, store_faults=store_faults)
    own = {s.field: draw(setting_draw(s, o)) for s in settings_of("scenario")}
    deployment = draw(deployments())
    # A list of launches, as Hypothesis draws lists: "one more?" before each after the
    # first, so the shrinker can delete any launch, not only the last.
    drawn: list[Launch] = []
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
            drawn[-1] = arrival(draw, drawn[-1], lags=faults)
        if len(drawn) >= max_phases or draw(MORE_LAUNCHES) == "stop":
            break
    # Each launch's tp, drawn after all launches (whose own choices they would shift), always
    # max_phases of them and aligned on the last launch: deleting a launch while shrinking
    # leaves every other's layout in place, and each shrinks to 1 on its own.
    tps = weighted(tuple(str(t) for t in TP_CHOICES), tp_odds(tier, profile))
    layouts = [int(draw(tps)) for _ in range(max_phases)]
    drawn = [replace(ph, tp=t) for ph, t in zip(drawn, layouts[-len(drawn) :], strict=True)]
    scenario = Scenario(
        data=data,
        pipeline=pipeline,
        launches=tuple(drawn),
        deployment=deployment,
        **own,
        plant=plant,
        name="generated",
    )
    # Aims last: every choice above keeps its meaning, and "free" shrinks the aims away.
    scenario = aim(draw, scenario, aims, aim_odds) if aims else scenario
    if store_faults:  # after every other choice, so that each keeps its meaning
        scenario = healed(draw, scenario, max_phases)
    scenario = normalised(scenario)
    # Faults normalising left in place (link, round-point rank and store faults) fail their
    # rounds in seconds, and a lagged round waits out its budget: all take the short one.
    if any(
        ph.proxy_faults or ph.store_faults or ph.lags or any(f.at_round for f in ph.rank_faults)
        for ph in scenario.launches
    ):
        scenario = scenario.with_(
            pipeline=replace(scenario.pipeline, aggregate_timeout_s=STORE_FAULT_TIMEOUT_S)
        )
    return scenario.validate()
