"""The scenario model: one run of data, lanes and phases (each a launch), with its faults.

Versioned and JSON round-trippable: a scenario found by the explorer is saved as a file that
``zephon-chaos replay`` runs again. Phase ``i > 0`` restores from the last checkpoint phase
``i - 1`` took; the reference is one uninterrupted run of the same data and lanes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from zephon_chaos.launch.spec import LAUNCH_PATHS, LaunchPath
from zephon_chaos.workload.spec import (
    AGGREGATIONS,
    FORMATS,
    MAPPINGS,
    RUNNERS,
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    SpecError,
    from_dict,
)

SCENARIO_VERSION = 1
RunIdPolicy = Literal["fixed", "per_launch"]


class ScenarioError(SpecError):
    """A scenario file or value that cannot be run; the message names the field."""


@dataclass(frozen=True)
class ProxyFault:
    """A toxic on one rank's link to the aggregation store, from a logical point on.

    ``rank``: whose link; ``toxic``: a Toxiproxy toxic type; ``attributes``: its attributes;
    ``stream``: upstream or downstream; ``at``: ``start`` or a checkpoint-round phase
    (``announce``, ``shard``, ``outcome``, ``ack``) seen by the interposer.
    """

    rank: int
    toxic: str
    attributes: dict[str, int] = field(default_factory=dict)
    stream: str = "downstream"
    at: str = "start"


@dataclass(frozen=True)
class Phase:
    world_size: int
    steps: int
    checkpoints: tuple[CheckpointAt, ...] = ()
    launch: LaunchPath = "standalone"
    rank_faults: tuple[RankFault, ...] = ()
    proxy_faults: tuple[ProxyFault, ...] = ()
    expect_failure: bool = False

    @property
    def restore_point(self) -> CheckpointAt | None:
        """The checkpoint the next phase restores from: the last one this phase takes."""
        return max(self.checkpoints, key=lambda c: (c.step, c.extra)) if self.checkpoints else None


@dataclass
class Scenario:
    data: DataSpec = field(default_factory=DataSpec)
    pipeline: PipelineSpec = field(default_factory=PipelineSpec)
    phases: tuple[Phase, ...] = ()
    persist_format: str = "pickle"
    run_id_policy: RunIdPolicy = "fixed"
    plant: str | None = None
    name: str = "scenario"
    version: int = SCENARIO_VERSION

    # ---- validation --------------------------------------------------------------------
    def validate(self) -> Scenario:
        """Raise ScenarioError naming the field, for values no run could use."""
        p = self.pipeline
        _check(p.canonical_replicas >= 1, "pipeline.canonical_replicas", "must be at least 1")
        _check(p.mapping in MAPPINGS, "pipeline.mapping", f"must be one of {MAPPINGS}")
        _check(p.runner in RUNNERS, "pipeline.runner", f"must be one of {RUNNERS}")
        _check(p.aggregation in AGGREGATIONS, "pipeline.aggregation", f"one of {AGGREGATIONS}")
        _check(p.aggregate_timeout_s > 0, "pipeline.aggregate_timeout_s", "must be positive")
        _check(self.persist_format in FORMATS, "persist_format", f"must be one of {FORMATS}")
        _check(
            self.run_id_policy in ("fixed", "per_launch"),
            "run_id_policy",
            "must be fixed or per_launch",
        )
        _check(bool(self.data.sources), "data.sources", "needs at least one source")
        _check(self.data.microbatch >= 1, "data.microbatch", "must be at least 1")
        _check(self.data.chunk_size >= 1, "data.chunk_size", "must be at least 1")
        _check(bool(self.phases), "phases", "needs at least one phase")
        for i, ph in enumerate(self.phases):
            where = f"phases[{i}]"
            _check(ph.world_size >= 1, f"{where}.world_size", "must be at least 1")
            _check(ph.steps >= 0, f"{where}.steps", "must be non-negative")
            _check(ph.launch in LAUNCH_PATHS, f"{where}.launch", f"one of {LAUNCH_PATHS}")
            for j, c in enumerate(ph.checkpoints):
                _check(
                    0 <= c.step and 0 <= c.extra and (c.step, c.extra) <= (ph.steps, 0),
                    f"{where}.checkpoints[{j}]",
                    f"must lie within the phase's {ph.steps} steps",
                )
            if i < len(self.phases) - 1 and not ph.expect_failure:
                _check(
                    ph.restore_point is not None,
                    f"{where}.checkpoints",
                    "a phase followed by another must checkpoint (the next one restores from it)",
                )
        return self

    # ---- derived -----------------------------------------------------------------------
    def run_id(self, phase_index: int) -> str:
        base = self.pipeline.run_id
        return base if self.run_id_policy == "fixed" else f"{base}-l{phase_index}"

    @property
    def reference_steps(self) -> int:
        """Global steps an uninterrupted run needs to cover every lane of this scenario."""
        total = 0
        for ph in self.phases[:-1]:
            rp = ph.restore_point
            if rp is not None:
                total += rp.step + (1 if rp.extra else 0)
        return total + self.phases[-1].steps

    @property
    def max_world_size(self) -> int:
        return max(ph.world_size for ph in self.phases)

    def summary(self) -> str:
        sizes = "→".join(str(ph.world_size) for ph in self.phases)
        cps = [
            f"{c.step}+{c.extra}" if c.extra else str(c.step)
            for ph in self.phases
            for c in ph.checkpoints
        ]
        faults = sum(len(ph.rank_faults) + len(ph.proxy_faults) for ph in self.phases)
        return (
            f"{self.name}: G {sizes}, C={self.pipeline.canonical_replicas} "
            f"({self.pipeline.mapping}), {self.pipeline.aggregation}, {self.persist_format}, "
            f"runner {self.pipeline.runner}, checkpoints [{', '.join(cps)}], {faults} fault(s)"
            + (f", plant {self.plant}" if self.plant else "")
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
            raise ScenarioError(str(exc)) from None

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


def _check(ok: bool, where: str, text: str) -> None:
    if not ok:
        raise ScenarioError(f"scenario.{where}: {text}")


def _scenario_from(raw: dict[str, Any], where: str) -> Scenario:
    known = {"data", "pipeline", "phases", "persist_format", "run_id_policy", "plant", "name",
             "version"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(unknown)}")
    data = from_dict(DataSpec, raw.get("data", {}), f"{where}.data")
    pipeline = from_dict(PipelineSpec, raw.get("pipeline", {}), f"{where}.pipeline")
    phases_raw = raw.get("phases", [])
    if not isinstance(phases_raw, list):
        raise ScenarioError(f"{where}.phases: expected a list")
    phases = tuple(_phase_from(p, f"{where}.phases[{i}]") for i, p in enumerate(phases_raw))
    rest = {k: raw[k] for k in ("persist_format", "run_id_policy", "plant", "name") if k in raw}
    return Scenario(data=data, pipeline=pipeline, phases=phases, version=SCENARIO_VERSION, **rest)


def _phase_from(raw: Any, where: str) -> Phase:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected an object")
    raw = dict(raw)
    nested = {
        "checkpoints": CheckpointAt,
        "rank_faults": RankFault,
        "proxy_faults": ProxyFault,
    }
    kwargs: dict[str, Any] = {}
    for key, cls in nested.items():
        items = raw.pop(key, [])
        if not isinstance(items, list):
            raise ScenarioError(f"{where}.{key}: expected a list")
        kwargs[key] = tuple(from_dict(cls, x, f"{where}.{key}[{i}]") for i, x in enumerate(items))
    try:
        return Phase(**raw, **kwargs)
    except TypeError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
