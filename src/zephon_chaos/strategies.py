"""Hypothesis strategies for scenarios: the whole space users reach, shrinking to the simplest.

Trajectories of 1-5 launches over world sizes 1..max (same size again, growth, shrink, G not
dividing C, G > C, which Zephon must refuse), checkpoints at any step (step 0 before the
first batch, mid-window, after the data ran out), every persistence format, aggregation mode
and runner, relaunches after a crash from the same checkpoint with the same run_id, and rank
fault schedules.

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
from zephon_chaos.scenario import Phase, Scenario
from zephon_chaos.workload.spec import (
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
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


_MORE = _weighted(("stop", "more"), (1, 3))
"""Another launch? Three times in four: most scenarios resume, yet shrinking stops early."""


def _source(draw: st.DrawFn, name: str, chunk_size: int) -> SourceSpec:
    """A few small shards holding at least one chunk (Zephon refuses less at the first batch)."""
    exhausted = draw(_weighted(("repeat", "stop"), (3, 1)))
    shards = [draw(_ints(8, 40)) for _ in range(draw(_ints(1, 3)))]
    if sum(shards) < chunk_size:
        shards[0] += chunk_size - sum(shards)
    return SourceSpec(
        name=name,
        shards=tuple(shards),
        weight=draw(_one_of((1.0, 0.5, 0.25))),
        kind=draw(_one_of(("memory", "jsonl"))),
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
def pipeline_specs(tier: Tier, max_c: int) -> st.SearchStrategy[PipelineSpec]:
    """C, mapping, runner, ``mtp_mode`` and aggregation; worker processes only on torchrun."""
    runners = (
        _weighted(("inline", "threads"), (2, 1))
        if tier == "inproc"
        else _weighted(("inline", "threads", "process"), (12, 6, 1))
    )
    mtp = (
        st.just(False)
        if tier == "inproc"
        else _weighted(("off", "on"), (19, 1)).map(lambda v: v == "on")
    )
    return st.builds(
        PipelineSpec,
        canonical_replicas=st.integers(1, max_c),
        mapping=st.sampled_from(("contiguous", "interleaved")),
        runner=runners,
        mtp_mode=mtp,
        aggregation=st.sampled_from(("store", "store_explicit", "dir")),
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
) -> Phase:
    c, mapping = pipeline.canonical_replicas, pipeline.mapping
    # Every choice is drawn whatever the earlier ones were, so that shrinking one value
    # (C, a world size, the data) does not shift the meaning of all the choices after it.
    world = draw(_ints(1, max_world))
    launch = "standalone" if tier == "inproc" else draw(_one_of(("standalone", "static", "c10d")))
    steps = draw(_ints(1, max_steps))
    max_extra = max(lanes_per_rank(min(world, c), c, mapping)) - 1
    wanted = []
    for _ in range(draw(_ints(0, 2))):
        # Any step, 0 (before the first batch) included; mid-window when ``extra`` > 0.
        step = draw(_ints(0, steps))
        extra = draw(_ints(0, max_extra))
        wanted.append(CheckpointAt(step, extra if step < steps else 0))
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
    return Phase(
        world_size=world,
        steps=steps,
        checkpoints=collective(wanted, world, c, mapping),
        launch=launch,  # type: ignore[arg-type]
        rank_faults=tuple(drawn_faults),
    )


def _settle(phases: list[Phase], finite: bool) -> tuple[Phase, ...]:
    """What depends on a phase's place: a launch followed by another checkpoints (at its end
    if it drew no checkpoint); over finite data the last one runs dry and none has faults (a
    rank whose data ran out never reaches its fault)."""
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
) -> Scenario:
    """A valid scenario for ``tier``; ``plant`` makes every one carry that deliberate defect."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    if max_world < 1 or not 1 <= max_phases <= 5:
        raise ValueError("max_world must be at least 1 and max_phases within 1..5")
    # Launches come last: shrinking their count then cuts the tail of the choices and leaves
    # the meaning of everything drawn before unchanged.
    pipeline = draw(pipeline_specs(tier, max_c=2 * max_world))
    data = _data(draw)
    persist_format = draw(_one_of(("pickle", "json", "torch")))
    run_id_policy = draw(_one_of(("fixed", "per_launch")))
    finite = any(s.exhausted == "stop" for s in data.sources)
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
            )
        )
        if len(drawn) >= max_phases or draw(_MORE) == "stop":
            break
    return Scenario(
        data=data,
        pipeline=pipeline,
        phases=_settle(drawn, finite),
        persist_format=persist_format,
        run_id_policy=run_id_policy,  # type: ignore[arg-type]
        plant=plant,
        name="generated",
    ).validate()
