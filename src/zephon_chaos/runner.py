"""Run a scenario: reference and phases as real groups, then the oracles, then a verdict.

The launcher is a parameter: torchrun CLI groups (default), the warm lane, or any callable
``LaunchSpec -> GroupResult``. Data flows one way: scenario → workload specs → launches →
records → oracles → outcome.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from zephon_chaos.launch import GroupResult, LaunchSpec, TorchrunGroup
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles.global_batches import PhaseRecords, Verdict, assemble, compare, lane_streams
from zephon_chaos.scenario import Phase, Scenario
from zephon_chaos.workload.data import materialize_jsonl
from zephon_chaos.workload.records import RankRecord, read_phase
from zephon_chaos.workload.spec import WorkloadSpec

Launcher = Callable[[LaunchSpec], GroupResult]


@dataclass
class PhaseRun:
    index: int
    phase: Phase
    spec: WorkloadSpec
    result: GroupResult
    records: list[RankRecord]
    checkpoints: ckpt_oracle.CheckpointVerdict

    @property
    def restore_index(self) -> int | None:
        """Index of the last checkpoint every rank completed (what the next phase restores)."""
        done = [f.index for f in self.checkpoints.facts if not f.failed and f.ok_ranks]
        return max(done) if done else None


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    reference: PhaseRun | None
    phases: list[PhaseRun] = field(default_factory=list)
    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)
    scenario_file: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and (self.verdict is None or self.verdict.ok)

    def report(self) -> str:
        lines = [self.scenario.summary()]
        for run in ([self.reference] if self.reference else []) + self.phases:
            lines.append(f"  {run.result.summary().splitlines()[0]}")
        lines += [f"  problem: {p}" for p in self.problems]
        if self.verdict is not None:
            lines.append(self.verdict.describe())
        if self.scenario_file is not None:
            lines.append(f"replay: zephon-chaos replay {shlex.quote(str(self.scenario_file))}")
        return "\n".join(lines)


def cli_launcher(root: Path) -> Launcher:
    """Launch through ``python -m torch.distributed.run``, each group under ``root``."""

    def launch(spec: LaunchSpec) -> GroupResult:
        with TorchrunGroup(spec, root / spec.name) as group:
            return group.run()

    return launch


def workload_spec(scenario: Scenario, index: int, out_dir: Path, data_dir: Path) -> WorkloadSpec:
    phase = scenario.phases[index]
    return WorkloadSpec(
        data=scenario.data,
        pipeline=replace(scenario.pipeline, run_id=scenario.run_id(index)),
        steps=phase.steps,
        checkpoints=phase.checkpoints,
        persist_format=scenario.persist_format,  # type: ignore[arg-type]
        out_dir=str(out_dir),
        data_dir=str(data_dir),
        faults=phase.rank_faults,
        plant=scenario.plant,
    )


class ScenarioRunner:
    """Runs scenarios under ``root``; reference runs are cached per data/lanes/steps."""

    def __init__(
        self,
        root: Path,
        launcher: Launcher | None = None,
        deadline_s: float = 120.0,
        reference_cache: dict[str, list[RankRecord]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.launcher = launcher or cli_launcher(self.root)
        self.deadline_s = deadline_s
        self.reference_cache = {} if reference_cache is None else reference_cache
        self._count = 0

    def _launch(self, name: str, spec: WorkloadSpec, world_size: int, path: str) -> GroupResult:
        spec_file = Path(spec.out_dir) / "spec.json"
        spec.write(spec_file)
        return self.launcher(
            LaunchSpec(
                entry="zephon_chaos.workload",
                module=True,
                args=[str(spec_file)],
                nproc=world_size,
                path=path,  # type: ignore[arg-type]
                deadline_s=self.deadline_s,
                name=name,
            )
        )

    def run(self, scenario: Scenario) -> ScenarioOutcome:
        scenario.validate()
        self._count += 1
        work = self.root / f"s{self._count}"
        work.mkdir(mode=0o700)
        data_dir = materialize_jsonl(scenario.data, work / "data")
        outcome = ScenarioOutcome(scenario, reference=None)
        outcome.scenario_file = scenario.save(work / "scenario.json")
        reference = self._reference(scenario, work, data_dir, outcome)
        if reference is None:
            return outcome
        kept: list[PhaseRecords] = []
        expected: dict[int, int] = {}
        restore_from: str | None = None
        store_host = None
        exact = True
        try:
            for i, phase in enumerate(scenario.phases):
                out = work / f"phase{i}"
                out.mkdir(mode=0o700)
                spec = workload_spec(scenario, i, out, data_dir)
                spec = replace(spec, restore_from=restore_from)
                if scenario.pipeline.aggregation == "dir":
                    spec = replace(spec, aggregate_dir=str(out / "aggregate"))
                elif scenario.pipeline.aggregation == "store_explicit":
                    if store_host is None:
                        from zephon_chaos.launch.store_host import StoreHost

                        store_host = StoreHost()
                    spec = replace(spec, store_uri=f"torch://{store_host.endpoint}")
                result = self._launch(f"s{self._count}-phase{i}", spec, phase.world_size, phase.launch)
                records = read_phase(out, phase.world_size)
                cps = ckpt_oracle.check(records, scenario.pipeline.canonical_replicas)
                run = PhaseRun(i, phase, spec, result, records, cps)
                outcome.phases.append(run)
                if phase.expect_failure:
                    if result.ok:
                        outcome.problems.append(f"phase {i} was expected to fail but succeeded")
                    return outcome
                if not result.ok:
                    outcome.problems.append(f"phase {i} failed: {result.summary()}")
                    return outcome
                outcome.problems += [f"phase {i}: {p}" for p in cps.problems]
                last = i == len(scenario.phases) - 1
                if last:
                    kept.append(PhaseRecords(phase.world_size, records, None))
                    for lane in range(scenario.pipeline.canonical_replicas):
                        expected[lane] = expected.get(lane, 0) + phase.steps
                    break
                index = run.restore_index
                if index is None:
                    outcome.problems.append(f"phase {i} completed no checkpoint to restore from")
                    return outcome
                facts = next(f for f in cps.facts if f.index == index)
                kept.append(PhaseRecords(phase.world_size, records, index + 1))
                for lane, n in facts.lane_counts.items():
                    expected[lane] = expected.get(lane, 0) + n
                if facts.mid_window and scenario.phases[i + 1].world_size != phase.world_size:
                    exact = False
                restore_from = str(spec.checkpoint_path(index))
        finally:
            if store_host is not None:
                store_host.close()
        ref_streams = lane_streams(reference)
        expected = {lane: min(n, len(ref_streams.get(lane, []))) for lane, n in expected.items()}
        outcome.verdict = compare(ref_streams, assemble(kept), expected, exact=exact)
        return outcome

    def _reference(
        self, scenario: Scenario, work: Path, data_dir: Path, outcome: ScenarioOutcome
    ) -> list[RankRecord] | None:
        world = scenario.phases[0].world_size
        ref = Scenario(
            data=scenario.data,
            pipeline=replace(scenario.pipeline, aggregation="store"),
            phases=(Phase(world_size=world, steps=scenario.reference_steps),),
            name=f"{scenario.name}-reference",
        )
        key = ref.to_json()
        if key in self.reference_cache:
            return self.reference_cache[key]
        out = work / "reference"
        out.mkdir(mode=0o700)
        spec = workload_spec(ref, 0, out, data_dir)
        result = self._launch(f"s{self._count}-reference", spec, world, "standalone")
        records = read_phase(out, world)
        outcome.reference = PhaseRun(-1, ref.phases[0], spec, result, records,
                                     ckpt_oracle.CheckpointVerdict(ok=True))
        if not result.ok:
            outcome.problems.append(f"the reference run failed: {result.summary()}")
            return None
        self.reference_cache[key] = records
        return records


def close_quietly(runner: ScenarioRunner) -> None:
    with contextlib.suppress(Exception):
        runner.reference_cache.clear()
