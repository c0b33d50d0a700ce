"""The scenario model: one run of data and lanes over one launch or more, with its faults.

Versioned and JSON round-trippable: a scenario found by the explorer is saved as a file that
``zephon-chaos replay`` runs again, as it was found (:class:`Found`: the tier, the launch
lane and the signature). Launch ``i > 0`` restores from the last checkpoint launch ``i - 1``
took; the reference is one uninterrupted run of the same data and lanes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, astuple, dataclass, field, replace
from pathlib import Path
from typing import Any

from zephon_chaos.deployment import BEFORE_VERSION_2, DOWNSTREAM, Deployment, RunIdPolicy
from zephon_chaos.lanes import lanes_of
from zephon_chaos.launch.launch_spec import LAUNCH_LANES, LAUNCH_PATHS, LaunchLane, LaunchPath
from zephon_chaos.scenario_rules import STORE_ACTIONS as STORE_ACTIONS  # re-exported
from zephon_chaos.scenario_rules import Refusal, Rule, rank_point, violations
from zephon_chaos.workload.spec import (
    AGGREGATIONS,
    FORMATS,
    MAPPINGS,
    NEVER,
    RETRIES,
    RUNNERS,
    SYNCS,
    CheckpointAt,
    ChildFault,
    DataSpec,
    PipelineSpec,
    RankFault,
    RankLag,
    Retry,
    SpecError,
    Sync,
    from_dict,
)

SCENARIO_VERSION = 4
"""4: the launches are ``launches`` (:attr:`Scenario.launches`) and each names its launch path
``path`` (:attr:`Launch.path`); a file of version 1 to 3 calls them ``phases`` and it
``launch``, and loads as such.
3: a link fault may heal (``ProxyFault.until``); a file of version 1 or 2 has none that
does, and loads with every ``until`` ``never``. 2: the deployment (``deployment.Deployment``)
is part of the scenario, and ``found`` (:class:`Found`) says how a finding was found. A file
of version 1 ran under ``deployment.BEFORE_VERSION_2`` and its ``run_id_policy``, has no
``found``, and loads as such."""
TIERS: tuple[str, ...] = ("inproc", "torchrun")
"""What runs a scenario: rank threads in one interpreter, or real torchrun groups."""


class ScenarioError(SpecError):
    """A scenario file or value that cannot be run; the message names the field, ``rule`` the
    refusal (``docs/space.md``) where the scenario model made it."""

    def __init__(self, message: str, rule: Rule | None = None) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class ProxyFault:
    """A toxic on one rank's link to the aggregation store, from a logical point on.

    ``rank``: whose link; ``toxic``: a Toxiproxy toxic type; ``attributes``: its attributes;
    ``stream``: upstream or downstream; ``at``: ``start`` or a checkpoint-round phase
    (``announce``, ``shard``, ``outcome``, ``ack``) seen by the interposer; ``until``
    (``LINK_HEALS``): when it is removed: ``never`` (it stays to the launch's end), or
    ``round_end``: once the rank's ``checkpoint()`` call it fired in has returned or raised
    (a transient reset or cut; the next checkpoint must then complete, ``oracles.healing``).
    """

    rank: int
    toxic: str
    attributes: dict[str, int] = field(default_factory=dict)
    stream: str = "downstream"
    at: str = "start"
    until: str = NEVER

    @property
    def heals(self) -> bool:
        """Removed before the launch ends (``until`` other than ``never``)."""
        return self.until != NEVER


@dataclass(frozen=True)
class StoreFault:
    """A fault of the harness-hosted store (aggregation ``store_explicit``) at a round point.

    ``action`` (``STORE_ACTIONS``): ``sigstop`` stalls the store process for ``stall_s``, then
    SIGCONT; ``kill`` ends it (the next launch gets an empty one on the same port);
    ``restart`` replaces it at once by an empty store on the same port. ``at``: a round point
    (``announce``, ``shard#2``, ...), seen by the interposer of the rank that writes it (the
    leader; a follower for ``ack``), which waits while the harness acts.
    """

    action: str
    at: str = "announce"
    stall_s: float = 1.0


@dataclass(frozen=True)
class Found:
    """How ``explore`` found a scenario it saved: ``replay`` reruns it so unless told."""

    tier: str
    """``inproc`` or ``torchrun`` (:data:`TIERS`)."""
    launch: LaunchLane
    """The launch lane of the torchrun tier (``launch.launch_spec.LAUNCH_LANES``) the exploration
    ran with: the lane its torchrun runs and confirmations used."""
    signature: str
    """What it failed with, the finding's signature (``explore.signature``)."""


@dataclass(frozen=True)
class Launch:
    """One launch of the scenario: ``world_size`` ranks run ``steps`` global steps, take
    ``checkpoints`` and meet their faults; a launch after the first restores the last
    checkpoint the one before it handed on."""

    world_size: int
    steps: int
    checkpoints: tuple[CheckpointAt, ...] = ()
    path: LaunchPath = "standalone"
    """How torchrun starts the group (``launch.launch_spec.LAUNCH_PATHS``): ``standalone``, or a
    rendezvous of the ``static`` or ``c10d`` kind. A file before version 4 calls it
    ``launch``."""
    rank_faults: tuple[RankFault, ...] = ()
    proxy_faults: tuple[ProxyFault, ...] = ()
    store_faults: tuple[StoreFault, ...] = ()
    """Faults of the harness-hosted store (``StoreFault``), which outlives the launches."""
    child_faults: tuple[ChildFault, ...] = ()
    """Kills of a rank's pipeline child processes (``ChildFault``): the rank lives and draws
    on, so the launch is judged as one that completes (torchrun only)."""
    max_restarts: int = 0
    """torchrun ``--max-restarts``: with a rank fault (attempt 0 only) the agent restarts
    every worker, and attempt 1 resumes the latest checkpoint attempt 0 persisted."""
    expect_failure: bool = False
    expect_error: str = ""
    """With ``expect_failure``: a fragment the first failing rank's error must contain."""
    canonical_replicas: int | None = None
    """Overrides the scenario's C for this launch (a changed C must be refused at restore)."""
    retry: Retry = "none"
    """After a failed checkpoint: raise (none), retry with every rank (lockstep), or each rank
    alone (independent); see ``WorkloadSpec.retry``."""
    sync: Sync = "lockstep"
    """How ranks arrive at each checkpoint (``workload.spec.SYNCS``): in lockstep, as trainers
    do, or free-running, where a rank later than ``aggregate_timeout_s`` fails the round as
    Zephon documents."""
    lags: tuple[RankLag, ...] = ()
    """Deliberate late arrivals at checkpoints (``workload.spec.RankLag``), under ``sync: free``:
    a rank that calls a checkpoint only once a peer's call of it has ended."""
    hosts: int = 1
    """> 1: the ranks spread evenly over that many hosts, each a network namespace with an
    agent of its own (``launch.netns``, needs root); with ``path`` c10d or static."""
    tp: int = 1
    """Tensor-parallel ranks per data-parallel group: the launch is ``world_size / tp`` DP
    groups of ``tp`` ranks each (rank r in group ``r // tp``) that read the same lanes, as
    the downstream adapter configures Zephon (``dp_degree``, ``dp_group_id``)."""

    @property
    def dp(self) -> int:
        """Data-parallel groups of the launch (Zephon's ``dp_degree``); lanes are theirs."""
        return self.world_size // max(1, self.tp)

    def unfaulted(self) -> Launch:
        """This launch with no fault of any kind, no restart and no retry policy."""
        return replace(
            self,
            rank_faults=(),
            proxy_faults=(),
            store_faults=(),
            lags=(),
            child_faults=(),
            max_restarts=0,
            retry="none",
        )

    @property
    def restore_point(self) -> CheckpointAt | None:
        """The checkpoint the next launch restores from: the last one this launch takes."""
        return max(self.checkpoints, key=lambda c: (c.step, c.extra)) if self.checkpoints else None


@dataclass
class Scenario:
    data: DataSpec = field(default_factory=DataSpec)
    pipeline: PipelineSpec = field(default_factory=PipelineSpec)
    launches: tuple[Launch, ...] = ()
    persist_format: str = "pickle"
    deployment: Deployment = DOWNSTREAM
    """What outlives a launch and who touches it between launches (``deployment``)."""
    plant: str | None = None
    name: str = "scenario"
    backend: str = "gloo"
    """Process-group backend of every launch: gloo (CPU) or nccl (one CUDA device per rank)."""
    found: Found | None = field(default=None, compare=False)
    """Set in a finding's file: how it was found. Not part of what runs, so not compared."""
    version: int = SCENARIO_VERSION

    # ---- validation --------------------------------------------------------------------
    def validate(self) -> Scenario:
        """Raise ScenarioError naming the field, for values no run could use."""
        p, r = self.pipeline, Rule
        _check(
            p.canonical_replicas >= 1,
            "pipeline.canonical_replicas",
            "must be at least 1",
            r.C_AT_LEAST_ONE,
        )
        _check(
            p.mapping in MAPPINGS, "pipeline.mapping", f"must be one of {MAPPINGS}", r.MAPPING_KNOWN
        )
        _check(p.runner in RUNNERS, "pipeline.runner", f"must be one of {RUNNERS}", r.RUNNER_KNOWN)
        _check(
            p.aggregation in AGGREGATIONS,
            "pipeline.aggregation",
            f"one of {AGGREGATIONS}",
            r.AGGREGATION_KNOWN,
        )
        _check(
            p.aggregate_timeout_s > 0,
            "pipeline.aggregate_timeout_s",
            "must be positive",
            r.TIMEOUT_POSITIVE,
        )
        _check(
            self.persist_format in FORMATS,
            "persist_format",
            f"must be one of {FORMATS}",
            r.PERSIST_FORMAT_KNOWN,
        )
        _check(self.backend in ("gloo", "nccl"), "backend", "must be gloo or nccl", r.BACKEND_KNOWN)
        if bad := self.deployment.invalid():
            _check(False, f"deployment.{bad[0]}", bad[1], r.DEPLOYMENT_KNOWN)
        if (found := self.found) is not None:
            _check(found.tier in TIERS, "found.tier", f"must be one of {TIERS}", r.FOUND_KNOWN)
            _check(
                found.launch in LAUNCH_LANES,
                "found.launch",
                f"must be one of {LAUNCH_LANES}",
                r.FOUND_KNOWN,
            )
            _check(
                isinstance(found.signature, str) and bool(found.signature),
                "found.signature",
                "must be a non-empty string",
                r.FOUND_KNOWN,
            )
        _check(
            bool(self.data.sources), "data.sources", "needs at least one source", r.SOURCES_NONEMPTY
        )
        _check(
            self.data.microbatch >= 1,
            "data.microbatch",
            "must be at least 1",
            r.MICROBATCH_POSITIVE,
        )
        _check(
            self.data.chunk_size >= 1,
            "data.chunk_size",
            "must be at least 1",
            r.CHUNK_SIZE_POSITIVE,
        )
        if bad := self.data.stages.invalid():
            _check(False, f"data.stages.{bad[0]}", bad[1], Rule(bad[2]))
        _check(bool(self.launches), "launches", "needs at least one launch", r.PHASES_NONEMPTY)
        for i, ph in enumerate(self.launches):
            where = f"launches[{i}]"
            _check(
                ph.world_size >= 1,
                f"{where}.world_size",
                "must be at least 1",
                r.WORLD_SIZE_POSITIVE,
            )
            _check(ph.steps >= 0, f"{where}.steps", "must be non-negative", r.STEPS_NONNEGATIVE)
            _check(
                ph.path in LAUNCH_PATHS,
                f"{where}.path",
                f"one of {LAUNCH_PATHS}",
                r.LAUNCH_PATH_KNOWN,
            )
            _check(ph.retry in RETRIES, f"{where}.retry", f"one of {RETRIES}", r.RETRY_KNOWN)
            _check(ph.sync in SYNCS, f"{where}.sync", f"one of {SYNCS}", r.SYNC_KNOWN)
            _check(
                ph.hosts == 1
                or (ph.hosts > 1 and ph.path != "standalone" and ph.world_size % ph.hosts == 0),
                f"{where}.hosts",
                "must be 1, or more hosts that divide world_size, with path c10d or static",
                r.HOSTS_LAYOUT,
            )
            _check(ph.tp >= 1, f"{where}.tp", "must be at least 1", r.TP_POSITIVE)
            _check(
                ph.canonical_replicas is None or ph.canonical_replicas >= 1,
                f"{where}.canonical_replicas",
                "must be at least 1 (or absent: the pipeline's)",
                r.PHASE_C_AT_LEAST_ONE,
            )
        # What a launch may carry given its place: one model, shared with the strategies
        # and the explorer's polishing (``scenario_rules``).
        for v in violations(self):
            _check(False, v.field, v.text, v.rule)
        return self

    def canonical_replicas(self, i: int) -> int:
        """C of launch ``i``: its own override, else the pipeline's."""
        return self.launches[i].canonical_replicas or self.pipeline.canonical_replicas

    def _before_faults(self, i: int) -> int | None:
        """:func:`checkpoints_before_faults` of launch ``i``, with its own layout and C: what a
        crash hands on (``restore_index``) and what a restart resumes (``restart_kept``)."""
        ph = self.launches[i]
        return checkpoints_before_faults(
            ph.checkpoints,
            ph.rank_faults,
            ph.world_size,
            self.canonical_replicas(i),
            self.pipeline.mapping,
            ph.tp,
        )

    def restore_index(self, i: int) -> int | None:
        """Index of the checkpoint of launch ``i`` the next launch restores, if it takes one.

        A refused launch takes none; a crashing launch (rank faults) takes the ones before its
        first fault ends it; any other launch, its last.
        """
        ph = self.launches[i]
        if ph.expect_failure or ph.dp > self.canonical_replicas(i):
            return None
        done = len({astuple(cp) for cp in ph.checkpoints})
        if ph.rank_faults and not ph.max_restarts:
            before = self._before_faults(i)
            done = done if before is None else before
        return done - 1 if done else None

    # ---- derived -----------------------------------------------------------------------
    @property
    def run_id_policy(self) -> RunIdPolicy:
        return self.deployment.run_id

    def run_id(self, launch_index: int) -> str:
        """The run id launch ``launch_index`` configures (``Deployment.launch_run_id``)."""
        return self.deployment.launch_run_id(self.pipeline.run_id, launch_index)

    @property
    def reference_steps(self) -> int:
        """Global steps an uninterrupted run needs to cover every lane of this scenario."""
        total = 0
        for i, ph in enumerate(self.launches):
            kept = self.restart_kept(i)
            if kept is not None:  # each faulted attempt's batches up to what the next resumed
                faulted = max(f.until_attempt or 1 for f in ph.rank_faults)
                total += faulted * (kept.step + (1 if kept.extra else 0))
            rp = ph.restore_point
            if rp is not None and i < len(self.launches) - 1:
                total += rp.step + (1 if rp.extra else 0)
        return total + self.launches[-1].steps

    def restart_kept(self, i: int) -> CheckpointAt | None:
        """Of a launch torchrun restarts (``max_restarts``): the latest checkpoint an attempt
        its fault ended can hand on to the next (None: none), which the reference covers.
        Before a step fault, the last checkpoint due before it; a round-point fault's own
        round's checkpoint persists or not depending on how far its leader got, so what an
        attempt did hand on is read from its files after the launch (``runner.resume``)."""
        ph = self.launches[i]
        if not (ph.max_restarts and ph.rank_faults) or ph.expect_failure:
            return None
        marks = sorted({astuple(cp) for cp in ph.checkpoints})
        point = next((rank_point(f) for f in ph.rank_faults if f.at_round), None)
        if point is not None:
            return CheckpointAt(*marks[point[1] - 1]) if point[1] <= len(marks) else None
        before = self._before_faults(i)
        return CheckpointAt(*marks[before - 1]) if before else None

    def summary(self) -> str:
        sizes = "→".join(
            f"{ph.world_size}({ph.dp}x{ph.tp})" if ph.tp > 1 else str(ph.world_size)
            for ph in self.launches
        )
        cps = [
            f"{c.step}+{c.extra}" if c.extra else str(c.step)
            for ph in self.launches
            for c in ph.checkpoints
        ]
        faults = sum(
            len(ph.rank_faults) + len(ph.proxy_faults) + len(ph.store_faults) + len(ph.child_faults)
            for ph in self.launches
        )
        return (
            f"{self.name}: G {sizes}, C={self.pipeline.canonical_replicas} "
            f"({self.pipeline.mapping}), {self.pipeline.aggregation}, {self.persist_format}, "
            f"runner {self.pipeline.runner}"
            + (" + mtp_mode" if self.pipeline.mtp_mode else "")
            + f", checkpoints [{', '.join(cps)}], {faults} fault(s)"
            + "".join(f", retry {r}" for r in sorted({ph.retry for ph in self.launches} - {"none"}))
            + (", sync free" if any(ph.sync == "free" for ph in self.launches) else "")
            + (f", {lags} lag(s)" if (lags := sum(len(ph.lags) for ph in self.launches)) else "")
            + (f", plant {self.plant}" if self.plant else "")
            + (f", backend {self.backend}" if self.backend != "gloo" else "")
            + (f", stages {d}" if (d := self.data.stages.describe()) else "")
        )

    # ---- JSON --------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        path.write_text(self.to_json() + "\n")
        return path

    @classmethod
    def from_json(cls, text: str, where: str = "scenario") -> Scenario:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ScenarioError(f"{where}: not JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}: expected a JSON object")
        version = raw.get("version", SCENARIO_VERSION)
        if not isinstance(version, int) or version > SCENARIO_VERSION:
            raise ScenarioError(
                f"{where}.version: {version!r} is newer than this zephon-chaos reads "
                f"({SCENARIO_VERSION}); upgrade zephon-chaos to replay it"
            )
        try:
            return _scenario_from(raw, where).validate()
        except SpecError as exc:
            raise ScenarioError(str(exc), getattr(exc, "rule", None)) from None

    @classmethod
    def load(cls, path: Path | str) -> Scenario:
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ScenarioError(f"cannot read scenario file {path}: {exc.strerror}") from None
        return cls.from_json(text, where=str(path))

    def with_(self, **changes: Any) -> Scenario:
        return replace(self, **changes)


def checkpoints_before_faults(
    checkpoints: Sequence[CheckpointAt],
    faults: Sequence[RankFault],
    world_size: int,
    canonical_replicas: int,
    mapping: str,
    tp: int = 1,
) -> int | None:
    """How many checkpoints every rank completes before the first rank fault ends the launch.

    A fault fires on its rank before batch ``at_step * lanes``, ahead of a checkpoint due at
    that same batch; the checkpoints that rank reaches first are the collective ones. None
    when no fault applies. A fault timed by a round point is none of these: which of its
    launch's checkpoints survive is the fault oracle's to judge (the runner restores the
    last that did), so statically its launch hands on its last, as a link-faulted one does.
    """
    counts: list[int] = []
    for f in faults:
        if f.at_round or not 0 <= f.rank < world_size or world_size // tp > canonical_replicas:
            continue
        per = max(1, len(lanes_of(f.rank, world_size, canonical_replicas, mapping, tp)))
        marks = {c.step * per + min(c.extra, per) for c in checkpoints}
        counts.append(sum(1 for m in marks if m < f.at_step * per))
    return min(counts) if counts else None


def _check(ok: bool, where: str, text: str, rule: Rule) -> None:
    if not ok:
        raise ScenarioError(f"scenario.{where}: {text}", rule)


def _scenario_from(raw: dict[str, Any], where: str) -> Scenario:
    version = raw.get("version", SCENARIO_VERSION)
    key = "launches" if version >= 4 else "phases"  # versions 1 to 3 call the launches phases
    known = {
        "data",
        "pipeline",
        key,
        "persist_format",
        "deployment",
        "run_id_policy",
        "plant",
        "name",
        "version",
        "backend",
        "found",
    }
    if version >= 4 and "phases" in raw:
        raise ScenarioError(
            f"{where}.phases: a version-{version} file calls them launches "
            "(a file of version 1 to 3 says phases: give its version)"
        )
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(unknown)}")
    data = from_dict(DataSpec, raw.get("data", {}), f"{where}.data")
    pipeline = from_dict(PipelineSpec, raw.get("pipeline", {}), f"{where}.pipeline")
    launches_raw = raw.get(key, [])
    if not isinstance(launches_raw, list):
        raise ScenarioError(f"{where}.{key}: expected a list")
    launches = tuple(
        _launch_from(p, f"{where}.{key}[{i}]", version) for i, p in enumerate(launches_raw)
    )
    optional = ("persist_format", "plant", "name", "backend")
    rest: dict[str, Any] = {k: raw[k] for k in optional if k in raw}
    if raw.get("found") is not None:
        rest["found"] = from_dict(Found, raw["found"], f"{where}.found")
    scenario = Scenario(
        data=data,
        pipeline=pipeline,
        launches=launches,
        deployment=_deployment_from(raw, where),
        version=SCENARIO_VERSION,
        **rest,
    )
    unnamed = [isinstance(p, dict) and "expect_error" not in p for p in launches_raw]
    return _with_refusal_errors(scenario, unnamed)


def _deployment_from(raw: dict[str, Any], where: str) -> Deployment:
    """Version 2 names its deployment; version 1 ran under ``BEFORE_VERSION_2`` with its own
    ``run_id_policy`` (a file names one or the other, never both)."""
    if raw.get("version", SCENARIO_VERSION) < 2:
        if "deployment" in raw:
            raise ScenarioError(f"{where}.deployment: a version-1 file has none")
        return replace(BEFORE_VERSION_2, run_id=raw.get("run_id_policy", "fixed"))
    if "run_id_policy" in raw:
        if "deployment" in raw:
            raise ScenarioError(
                f"{where}.run_id_policy: version 2 names it as deployment.run_id; give one"
            )
        return replace(DOWNSTREAM, run_id=raw["run_id_policy"])
    return from_dict(Deployment, raw.get("deployment", {}), f"{where}.deployment")


def _with_refusal_errors(scenario: Scenario, unnamed: list[bool]) -> Scenario:
    """Files written before ``expect_error`` existed (their refusals were all G > C): such a
    refusal expects Zephon's own error."""
    launches = tuple(
        replace(ph, expect_error=Refusal.MORE_RANKS_THAN_LANES.value)
        if unnamed[i] and ph.expect_failure and ph.world_size > scenario.canonical_replicas(i)
        else ph
        for i, ph in enumerate(scenario.launches)
    )
    return scenario.with_(launches=launches)


def _launch_from(raw: Any, where: str, version: int) -> Launch:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected an object")
    raw = dict(raw)
    if version < 4:  # the launch path was ``launch`` before version 4; it is ``path`` now
        if "path" in raw:
            raise ScenarioError(f"{where}.path: a version-{version} file names it launch")
        if "launch" in raw:
            raw["path"] = raw.pop("launch")
    elif "launch" in raw:
        raise ScenarioError(
            f"{where}.launch: a version-{version} file calls the launch path path "
            "(a file of version 1 to 3 says launch: give its version)"
        )
    nested = {
        "checkpoints": CheckpointAt,
        "rank_faults": RankFault,
        "proxy_faults": ProxyFault,
        "lags": RankLag,
        "store_faults": StoreFault,
        "child_faults": ChildFault,
    }
    kwargs: dict[str, Any] = {}
    for key, cls in nested.items():
        items = raw.pop(key, [])
        if not isinstance(items, list):
            raise ScenarioError(f"{where}.{key}: expected a list")
        kwargs[key] = tuple(from_dict(cls, x, f"{where}.{key}[{i}]") for i, x in enumerate(items))
    try:
        return Launch(**raw, **kwargs)
    except TypeError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
