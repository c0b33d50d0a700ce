"""The scenario-wide settings, each written once: where its value lives, its values, its odds
per tier and profile, why a value cannot be reached, and which value an aim lands in.

A setting is one field of the pipeline, the scenario or the deployment. The strategies draw
each from its entry here (``strategies.generate``), the declared space lists its cells and
their reasons from it, landing reads its value back, and an aim at one of its cells sets it
(``aims.aimed``). Adding a setting is one :class:`Setting` in :data:`SETTINGS` plus its effect
(what the runner or the rank does with the field); docs/architecture.md shows one.

The structured dimensions (a launch's layout, its faults, its arrival) are drawn per launch
and have entries of their own in the explorer's table (``explore.table``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from zephon_chaos.deployment import CHOICES as DEPLOYMENT_CHOICES
from zephon_chaos.dimensions.cells import Cell, Declared, Dim, Why, cell
from zephon_chaos.scenario import Scenario
from zephon_chaos.validation.value_sets import (
    AGGREGATE_COMPRESSORS,
    AGGREGATE_SERIALIZERS,
    SHUTDOWN_MODES,
)

Tier = Literal["inproc", "torchrun"]
TIERS: tuple[Tier, ...] = ("inproc", "torchrun")
Profile = Literal["default", "downstream"]
PROFILES: tuple[Profile, ...] = ("default", "downstream")
"""``downstream``: the odds of what torchtitan-zephon runs (worker processes, ``mtp_mode``,
torchrun's store, DCP persistence, DP x TP layouts with tp 2) become the common case on
torchrun; ``default`` keeps worker processes rare, as each launch of them takes tens of
seconds."""
Owner = Literal["pipeline", "scenario", "deployment"]
"""Which object holds a setting's field: the strategies draw each owner's settings in
:data:`SETTINGS` order at that object's place in the draw (the pipeline first, the scenario's
own fields after the data, the deployment last)."""


@dataclass(frozen=True)
class Options:
    """What a run of the strategies, and so its declared space, was asked for."""

    tier: Tier = "inproc"
    profile: Profile = "default"
    store_faults: bool = False
    faults: bool = True
    max_world: int = 4
    max_phases: int = 5

    @property
    def inproc(self) -> bool:
        return self.tier == "inproc"

    @property
    def downstream(self) -> bool:
        """The downstream profile's odds apply (the in-process tier keeps its own)."""
        return self.profile == "downstream" and not self.inproc


@dataclass(frozen=True)
class Odds:
    """A setting's odds, one per value, by where a run draws: the first that applies of the
    in-process tier's, link faults' (``store_faults``), the downstream profile's, and the
    default (None: the next applies). ``default`` None: every value alike."""

    default: tuple[int, ...] | None = None
    inproc: tuple[int, ...] | None = None
    link_faults: tuple[int, ...] | None = None
    downstream: tuple[int, ...] | None = None

    def of(self, o: Options) -> tuple[int, ...] | None:
        if o.inproc and self.inproc is not None:
            return self.inproc
        if o.store_faults and self.link_faults is not None:
            return self.link_faults
        if o.profile == "downstream" and self.downstream is not None:
            return self.downstream
        return self.default


def _no_odds(o: Options) -> Why:
    return Why.NO_ODDS


def _threads_no_workers(o: Options) -> Why:
    return Why.THREADS_NO_WORKERS if o.inproc else Why.NO_ODDS


def _no_collective_save(o: Options) -> Why:
    if o.inproc:
        return Why.THREADS_NO_PROCESS_GROUP
    return Why.DCP_WITH_LINK_FAULTS if o.store_faults else Why.NO_ODDS


def _always(o: Options) -> Why | None:
    return None


@dataclass(frozen=True)
class Setting:
    """One scenario-wide choice. ``values`` are the field's drawn values, simplest first (each
    shrinks to the first); ``labels`` their cells' text (default ``str``); ``also``: values the
    rules set and the strategies never draw (declared, with ``also_why``); ``aims``: the
    values an aim lands in (rare, and each worth a scenario of its own); ``aim_cost``: what
    landing one costs, in units of a rank fault's (``aims.Aim.cost``)."""

    dim: Dim
    owner: Owner
    field: str
    values: tuple[Any, ...]
    odds: Odds = Odds()
    labels: tuple[str, ...] = ()
    unreachable: Callable[[Options], Why] = _no_odds
    """Why a value the odds give nothing cannot be reached."""
    also: tuple[Any, ...] = ()
    also_why: Callable[[Options], Why | None] = _always
    aims: tuple[Any, ...] = ()
    aim_cost: int = 1
    key: tuple[str, ...] = ()
    """What the cell's value starts with (a deployment field's name: one dimension holds all
    four fields)."""

    def label(self, value: Any) -> str:
        return self.labels[self.values.index(value)] if self.labels else str(value)

    def value_of(self, label: str) -> Any:
        """The value whose cell text is ``label`` (an aim's), drawn or set by the rules."""
        for v in (*self.values, *self.also):
            if self.label(v) == label:
                return v
        raise ValueError(f"{self.field} has no value {label!r}")

    def cell(self, value: Any) -> Cell:
        return cell(self.dim, *self.key, self.label(value))

    def declared(self, o: Options) -> list[Declared]:
        odds = self.odds.of(o) or (1,) * len(self.values)
        drawn = [
            Declared(self.cell(v), None if odd > 0 else self.unreachable(o))
            for v, odd in zip(self.values, odds, strict=True)
        ]
        return drawn + [Declared(self.cell(v), self.also_why(o)) for v in self.also]

    def get(self, scenario: Scenario) -> Any:
        holder = scenario if self.owner == "scenario" else getattr(scenario, self.owner)
        return getattr(holder, self.field)

    def put(self, scenario: Scenario, value: Any) -> Scenario:
        if self.owner == "scenario":
            return replace(scenario, **{self.field: value})
        holder = replace(getattr(scenario, self.owner), **{self.field: value})
        return replace(scenario, **{self.owner: holder})


# ---- the values and odds, named where the rest of the package reads them --------------------
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
MAPPING_CHOICES = ("contiguous", "interleaved")
AGGREGATION_CHOICES = ("store", "store_explicit", "dir")
AGGREGATION_ODDS = (1, 1, 1)
DOWNSTREAM_AGGREGATION_ODDS = (3, 1, 1)
"""torchrun's store, the recipe's default, three times in five; the hosted store and the job's
``aggregate_dir`` (the smoke recipes' ``ZEPHON_AGGREGATE_DIR``) one in five each."""
STORE_FAULT_AGGREGATION_ODDS = (1, 1, 1)
"""Odds of each of ``AGGREGATION_CHOICES`` with link faults on: each mode a fair share. A link
fault acts on a store only (under ``dir`` it is dropped), but ``dir`` still takes round-point
rank faults on its round files and what a relaunch meets in the job's directory."""
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
"""Zephon's default codec three times in four; values from ``validation.value_sets``."""
AGGREGATE_TIMEOUTS_S = (30.0, 180.0)
"""The spec's default, then Zephon's. Shorter ones belong to link-fault scenarios (which
set their own): a round can wait that long for a rank whose worker processes still start."""
STORE_FAULT_TIMEOUT_S = 2.0
"""``aggregate_timeout_s`` of a scenario with link faults: a failing round ends in seconds."""
PREFETCH_CHOICES = (None, 0, 1, 32)
"""``prefetch_batches``: Zephon's derived depth, none, one, deeper than derived here."""
PREFETCH_ODDS = (3, 3, 1, 3)
"""A depth of one costs each pipeline about a second at its end (Zephon's buffering producer
waits out its 1 s ``put`` timeout on a full queue of one: ``_internal/utils/buffering.py``),
five launches and a reference run six seconds: drawn 1 time in 10 to keep the search's rate."""
SHUTDOWN_CHOICES = SHUTDOWN_MODES
SHUTDOWN_ODDS = (3, 1)
DEPLOYMENT_ODDS: dict[str, tuple[int, ...]] = {
    "aggregate_dir": (3, 1),
    "hosted_store": (3, 1),
    "run_id": (3, 1, 1),
    "operator": (3, 1),
}
"""Odds of each ``Deployment`` field's values, in the order ``deployment`` lists them: the
downstream's default (one directory, one store, one run id, nobody cleaning up) three times
in five or more, and every value a real job may choose drawn too (each shrinks to the
default)."""
WORKER_PROCESS_COST = 24
"""A setting's aimed cell that starts worker processes, each of which imports torch (58-85 s
a scenario measured on torchrun, one cell each; docs/measurements.md)."""


def _timeout_reason(o: Options) -> Why | None:
    """The short timeout of a scenario with link faults or a round-point rank fault."""
    if o.faults and o.max_world >= 2:
        return None
    if not o.store_faults:
        return Why.STORE_FAULTS_OFF
    return Why.ONE_RANK if o.max_world < 2 else None


SETTINGS: tuple[Setting, ...] = (
    # The pipeline's, in the order the strategies draw them (after C).
    Setting(Dim.MAPPING, "pipeline", "mapping", MAPPING_CHOICES),
    Setting(
        Dim.RUNNER,
        "pipeline",
        "runner",
        RUNNER_CHOICES,
        Odds(TORCHRUN_RUNNER_ODDS, inproc=INPROC_RUNNER_ODDS, downstream=DOWNSTREAM_RUNNER_ODDS),
        unreachable=_threads_no_workers,
        aims=("process",),
        aim_cost=WORKER_PROCESS_COST,
    ),
    Setting(
        Dim.MTP,
        "pipeline",
        "mtp_mode",
        (False, True),
        Odds(TORCHRUN_MTP_ODDS, inproc=(1, 0), downstream=DOWNSTREAM_MTP_ODDS),
        labels=MTP_CHOICES,
        unreachable=_threads_no_workers,
        aims=(True,),
        aim_cost=WORKER_PROCESS_COST,
    ),
    Setting(
        Dim.AGGREGATION,
        "pipeline",
        "aggregation",
        AGGREGATION_CHOICES,
        Odds(
            AGGREGATION_ODDS,
            link_faults=STORE_FAULT_AGGREGATION_ODDS,
            downstream=DOWNSTREAM_AGGREGATION_ODDS,
        ),
    ),
    Setting(
        Dim.TIMEOUT,
        "pipeline",
        "aggregate_timeout_s",
        AGGREGATE_TIMEOUTS_S,
        also=(STORE_FAULT_TIMEOUT_S,),
        also_why=_timeout_reason,
    ),
    Setting(
        Dim.SERIALIZER, "pipeline", "aggregate_serializer", SERIALIZER_CHOICES, Odds(CODEC_ODDS)
    ),
    Setting(
        Dim.COMPRESSOR, "pipeline", "aggregate_compressor", COMPRESSOR_CHOICES, Odds(CODEC_ODDS)
    ),
    Setting(Dim.PREFETCH, "pipeline", "prefetch_batches", PREFETCH_CHOICES, Odds(PREFETCH_ODDS)),
    Setting(Dim.SHUTDOWN, "pipeline", "shutdown_mode", SHUTDOWN_CHOICES, Odds(SHUTDOWN_ODDS)),
    # The scenario's own, drawn after the data.
    Setting(
        Dim.PERSISTENCE,
        "scenario",
        "persist_format",
        PERSIST_FORMATS,
        Odds(
            TORCHRUN_PERSIST_ODDS,
            inproc=INPROC_PERSIST_ODDS,
            link_faults=STORE_FAULT_PERSIST_ODDS,
            downstream=DOWNSTREAM_PERSIST_ODDS,
        ),
        unreachable=_no_collective_save,
    ),
    # The deployment's, drawn last (``zephon_chaos.deployment``).
    *(
        Setting(
            Dim.DEPLOYMENT, "deployment", name, values, Odds(DEPLOYMENT_ODDS[name]), key=(name,)
        )
        for name, values in DEPLOYMENT_CHOICES.items()
    ),
)
"""Every scenario-wide setting; a setting added here is drawn, declared, landed and aimed at."""


def settings_of(owner: Owner, table: tuple[Setting, ...] | None = None) -> tuple[Setting, ...]:
    """``owner``'s settings in draw order (of ``table``, :data:`SETTINGS` by default: read at
    each call, so that a test's added setting is seen)."""
    return tuple(s for s in (SETTINGS if table is None else table) if s.owner == owner)


def setting_of(field: str) -> Setting:
    """The setting of ``field`` (every setting's field has a name of its own)."""
    for s in SETTINGS:
        if s.field == field:
            return s
    raise KeyError(f"no setting sets {field!r}")
