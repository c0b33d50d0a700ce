"""Run a scenario: reference and phases as real groups, then the oracles, then a verdict.

The launcher is a parameter: torchrun CLI groups (default), the warm lane, or any callable
``LaunchSpec -> GroupResult``. Data flows one way: scenario → workload specs → launches →
records → oracles → outcome.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from zephon_chaos.diagnostics.stacks import collect_group_stacks
from zephon_chaos.harness_problem import undescribed_failure
from zephon_chaos.launch import Formation, GroupResult, LaunchSpec, TorchrunGroup
from zephon_chaos.launch.hangwatch import HangWatch
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles import dp_groups as dp_oracle
from zephon_chaos.oracles import liveness as liveness_oracle
from zephon_chaos.oracles import policies as policy_oracle
from zephon_chaos.problem import Area, found_in
from zephon_chaos.runner.checks import (
    child_fault_gaps,
    failed_launch,
    group_never_formed,
    judged_by_resuming,
)
from zephon_chaos.runner.deadlines import (
    Ceiling,
    CeilingKind,
    Deadline,
    MeasuredReference,
    ReferenceTiming,
    every_rank_began,
    launch_deadline,
    measure_reference,
    plan_of,
)
from zephon_chaos.runner.fate import Fate, phase_fate
from zephon_chaos.runner.hangs import HangSignature, LaunchContext, hang_watch, quiet_period_s
from zephon_chaos.runner.outcome import PhaseRun, ScenarioOutcome
from zephon_chaos.runner.relaunches import Relaunches
from zephon_chaos.runner.resume import Resume, restarted_attempt
from zephon_chaos.runner.verify import reference_margin, verify_run
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.data import materialize_jsonl
from zephon_chaos.workload.records import read_phase
from zephon_chaos.workload.spec import WorkloadSpec

Launcher = Callable[[LaunchSpec], GroupResult]


def cli_launcher(root: Path) -> Launcher:
    """Launch through ``python -m torch.distributed.run``, each group under ``root``; a group
    that passes its deadline has its ranks' stacks taken first (a hang's only evidence)."""

    def launch(spec: LaunchSpec) -> GroupResult:
        if spec.hosts > 1:
            from zephon_chaos.launch.netns_group import run_on_hosts

            return run_on_hosts(spec, root / spec.name, on_deadline=collect_group_stacks)
        with TorchrunGroup(spec, root / spec.name, on_deadline=collect_group_stacks) as group:
            return group.run()

    return launch


def workload_spec(scenario: Scenario, index: int, out_dir: Path, data_dir: Path) -> WorkloadSpec:
    phase = scenario.launches[index]
    return WorkloadSpec(
        data=scenario.data,
        pipeline=replace(
            scenario.pipeline,
            run_id=scenario.run_id(index),
            canonical_replicas=phase.canonical_replicas or scenario.pipeline.canonical_replicas,
        ),
        steps=phase.steps,
        checkpoints=phase.checkpoints,
        persist_format=scenario.persist_format,  # type: ignore[arg-type]
        out_dir=str(out_dir),
        data_dir=str(data_dir),
        faults=tuple(f for f in phase.rank_faults if not f.at_round),
        child_faults=phase.child_faults,
        retry=phase.retry,
        sync=phase.sync,
        tp=phase.tp,
        lags=phase.lags,
        run_id_per_restart=scenario.deployment.run_id == "per_restart",
        plant=scenario.plant,
        backend=scenario.backend,  # type: ignore[arg-type]
    )


class ScenarioRunner:
    """Runs scenarios under ``root``; reference runs are cached per data/lanes/steps."""

    def __init__(
        self,
        root: Path,
        launcher: Launcher | None = None,
        deadline_s: float = 120.0,
        reference_cache: dict[str, MeasuredReference] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.launcher = launcher or cli_launcher(self.root)
        self.deadline_s = deadline_s
        self.reference_cache = {} if reference_cache is None else reference_cache
        self._count = 0

    deadline_cap: Callable[[float], float] | None = None
    """Caps each launch's deadline at launch time: given the deadline a launch would get,
    the most it may have (an explorer's remaining budget)."""

    def _capped(self, deadline: Deadline) -> Deadline:
        cap = self.deadline_cap
        if cap is None:
            return deadline
        return deadline.capped(Ceiling(CeilingKind.BUDGET, cap(deadline.seconds)))

    formation_ceiling_s: float | None = None
    """The most a torchrun launch may take to form its group (every rank began its loop);
    None: its deadline's ceiling. A ceiling raised for pipelines with worker processes
    (``explore.config.WORKER_PROCESS_FACTOR``) is no reason to wait longer for a formation:
    those processes start after it."""

    hang_signatures: Mapping[str, HangSignature] = MappingProxyType({})
    """Known hangs by id (injected, as ``deadline_cap`` is): a launch whose stacks show one
    after a quiet period is cut short as it (``runner.hangs``); none: every hang waits out
    its deadline."""
    hang_quiet_s: float | None = None
    """The quiet period before a launch's stacks are looked at; None: ``quiet_period_s`` of
    its ``aggregate_timeout_s`` and pipeline."""

    def _hang_watch(self, context: LaunchContext, spec: WorkloadSpec) -> HangWatch | None:
        """The launch's watch for the known hangs, if any are known."""
        if not self.hang_signatures:
            return None
        workers = spec.pipeline.runner == "process" or spec.pipeline.mtp_mode
        quiet = self.hang_quiet_s or quiet_period_s(spec.pipeline.aggregate_timeout_s, workers)
        return hang_watch(self.hang_signatures, context, quiet)

    def _deadline(self) -> float:
        """The flat deadline, capped: a launch with nothing measured to derive one from."""
        return self._flat_deadline().seconds

    def _flat_deadline(self) -> Deadline:
        flat = Ceiling(CeilingKind.FLAT, self.deadline_s)
        return self._capped(Deadline(flat.seconds, None, 0.0, 0, 0.0, 0.0, flat))

    def _phase_deadline(
        self,
        phase: Launch,
        spec: WorkloadSpec,
        reference: ReferenceTiming | None,
        faults: Sequence[LaunchFault] = (),
    ) -> Deadline:
        """What the launch of ``phase`` should take, from the reference's timing, its
        faults' bounds and a margin, under the flat deadline and any deadline its faults
        impose (``runner.deadlines``)."""
        ceilings = [Ceiling(CeilingKind.FLAT, self.deadline_s)]
        for fault in faults:
            own = fault.deadline_ceiling_s(spec)
            if own is not None:
                ceilings.append(Ceiling(CeilingKind.STALL, own))
        plan = plan_of(phase, spec)
        return self._capped(launch_deadline(reference, plan, ceilings, os.getloadavg()[0]))

    def open_store(self) -> Any:
        """The store aggregation ``store_explicit`` names, kept across the scenario's launches."""
        from zephon_chaos.launch.store_host import StoreHost

        return StoreHost()

    def close_store(self, host: Any) -> None:
        host.close()

    def open_store_process(self, work: Path) -> Any:
        """The explicit store in a process of its own, for a scenario that faults it."""
        from zephon_chaos.launch.store_process import StoreProcess

        return StoreProcess(deadline_s=4 * self.deadline_s, pid_file=work / "store.pids")

    _launch_restarts: int = 0
    """torchrun ``--max-restarts`` of the launch being started (``Launch.max_restarts``)."""

    def finish_launch(self) -> None:
        """What a launch's ranks do at exit is done: a rank process has exited when its launch
        returns (the in-process tier collects its threads' pipelines here)."""

    def open_proxy_faults(self) -> Any:
        """A Toxiproxy session for the scenario's proxy-faulted phases (closed at its end)."""
        from zephon_chaos.nemeses.scenario_proxy import ProxyFaultSession

        return ProxyFaultSession()

    def _launch(
        self,
        name: str,
        spec: WorkloadSpec,
        world_size: int,
        path: str,
        hosts: int = 1,
        deadline_s: float | None = None,
        watch: HangWatch | None = None,
        formation: Formation | None = None,
    ) -> GroupResult:
        spec_file = Path(spec.out_dir) / "spec.json"
        spec.write(spec_file)
        return self.launcher(
            LaunchSpec(
                entry="zephon_chaos.rank",
                module=True,
                args=[str(spec_file)],
                nproc=world_size // hosts,
                nnodes=hosts,
                hosts=hosts,
                path=path,  # type: ignore[arg-type]
                deadline_s=self._deadline() if deadline_s is None else deadline_s,
                name=name,
                max_restarts=self._launch_restarts,
                hang_watch=watch,
                formation=formation,
            )
        )

    def _verification(self, name: str, spec: WorkloadSpec, world_size: int) -> GroupResult:
        """One launch resuming a merged checkpoint to judge it (``runner.verify``)."""
        return self._launch(name, spec, world_size, "standalone")

    def run(self, scenario: Scenario) -> ScenarioOutcome:
        scenario.validate()
        self._count += 1
        work = self.root / f"s{self._count}"
        work.mkdir(mode=0o700)
        data_dir = materialize_jsonl(scenario.data, work / "data")
        outcome = ScenarioOutcome(scenario, reference=None)
        outcome.scenario_file = scenario.save(work / "scenario.json")
        measured = self._reference(scenario, work, data_dir, outcome)
        if measured is None:
            return outcome
        reference = measured.records
        # Imported here: the drivers bring the proxy client (requests) with them, which a
        # command that runs no scenario must not pay for (tests/unit/commands/test_proxy.py).
        from zephon_chaos.nemeses.launch_faults import launch_faults

        track = Resume()
        store_host = None
        proxy_faults = None

        def proxy_session() -> Any:
            """The scenario's Toxiproxy session, opened for its first link-faulted launch."""
            nonlocal proxy_faults
            proxy_faults = proxy_faults or self.open_proxy_faults()
            return proxy_faults

        world = Relaunches(scenario.deployment, work / "aggregate")
        try:
            for i, phase in enumerate(scenario.launches):
                out = work / f"phase{i}"
                out.mkdir(mode=0o700)
                spec = workload_spec(scenario, i, out, data_dir)
                spec = replace(spec, restore_from=track.restore_from)
                if scenario.pipeline.aggregation == "dir":
                    spec = replace(spec, aggregate_dir=str(world.directory(out)))
                elif scenario.pipeline.aggregation == "store_explicit":
                    if store_host is None or scenario.deployment.hosted_store == "launch":
                        if store_host is not None:  # a fresh store per launch, as deployed
                            self.close_store(store_host)
                        faults = any(ph.store_faults for ph in scenario.launches)
                        store_host = self.open_store_process(work) if faults else self.open_store()
                        world.fresh_store()
                    elif not getattr(store_host, "serving", True):
                        store_host.restart()  # killed by the last launch's fault: empty
                        world.fresh_store()
                    spec = replace(spec, store_uri=f"torch://{store_host.endpoint}")
                    world.use_store(store_host.endpoint)
                met = world.before_launch(spec, i)
                faults = launch_faults(phase, spec, store_host, proxy_session)
                deadline = self._phase_deadline(phase, spec, measured.timing, faults)
                for fault in faults:
                    spec = fault.prepare(spec)
                if phase.max_restarts:
                    spec = replace(spec, resume_on_restart=True)
                self._launch_restarts = phase.max_restarts
                context = LaunchContext(phase, out, next(iter(faults), None))
                formation = formation_of(
                    deadline, out, phase.world_size, self.formation_ceiling_s
                )
                with contextlib.ExitStack() as acting:
                    # The fault watchers outlast any deadline the launch may get: they end
                    # with it.
                    for fault in faults:
                        acting.enter_context(fault.watching(deadline.ceiling.seconds))
                    result = self._launch(
                        f"s{self._count}-phase{i}",
                        spec,
                        phase.world_size,
                        phase.path,
                        phase.hosts,
                        deadline.seconds,
                        self._hang_watch(context, spec),
                        formation,
                    )
                passed(result, deadline, formation)
                self._launch_restarts = 0
                if world.place is not None and i < len(scenario.launches) - 1:
                    self.finish_launch()  # Zephon's teardown done before the next one looks
                world.after_launch(getattr(store_host, "serving", True))
                restarted = None
                if phase.max_restarts and phase.rank_faults:
                    # torchrun restarted the workers: each attempt the fault ended is judged on
                    # its own records (a round-point fault's round too) and kept up to the
                    # checkpoint the next resumed; the attempt the fault spared is judged as
                    # the launch from here on, with what it met of the dead attempts' rounds.
                    rounds = next((f for f in faults if f.judges_rank_faults), None)
                    restarted = restarted_attempt(scenario, i, spec, result, track, outcome, rounds)
                if restarted is not None:
                    out, spec, track = restarted.out, restarted.spec, restarted.track
                    met = replace(met, round=restarted.met, cleared=False)
                    phase = replace(phase, rank_faults=())
                    faults = tuple(f for f in faults if not f.judges_rank_faults)
                launched = read_phase(out, phase.world_size)
                never = group_never_formed(f"phase {i}", result, launched)
                if never is not None:  # it tested nothing: the scenario ends without a verdict
                    outcome.harness_problems.append(never)
                    outcome.unformed.append(result)
                    return outcome
                records = track.cumulative(launched)
                outcome.problems += found_in(i, dp_oracle.judge(records, phase.tp))
                c = scenario.canonical_replicas(i)
                cps = ckpt_oracle.check(
                    records,
                    c,
                    failures_judged=phase.retry == "skip",
                    by_resuming=judged_by_resuming(phase),
                )
                run = PhaseRun(i, phase, spec, result, records, cps, deadline=deadline)
                run.met_round, run.cleared_round = met.round, met.cleared
                outcome.harness_problems += met.problems
                for fault in faults:
                    fault.observe(run)
                outcome.phases.append(run)
                if restarted is not None and restarted.failed is not None:
                    outcome.problems.append(restarted.failed)  # torchrun restarted it too
                    return outcome
                run.liveness = liveness_oracle.judge_run(run)
                run.policy = policy_oracle.judge_run(run)
                outcome.problems += found_in(i, run.liveness, run.policy)
                verify_run(self._verification, scenario, run, reference, outcome)
                judged = phase_fate(scenario, run, faults)
                outcome.problems += judged.problems
                outcome.harness_problems += judged.harness_problems + child_fault_gaps(run)
                if judged.fate is Fate.REFUSED:
                    continue
                track, fact = track.resumed(i, phase.world_size, phase.tp)
                if fact is not None:
                    outcome.resumes.append(fact)
                if judged.fate is Fate.LAST:
                    track = track.keep_all(run, range(c), reference)
                    break
                if judged.fate.cut_short:
                    return outcome
                if judged.keep is not None:
                    track = track.keep(run, judged.keep)
        finally:
            if store_host is not None:
                self.close_store(store_host)
            if proxy_faults is not None:
                proxy_faults.close()
        outcome.verdict = track.verdict(reference)
        outcome.kept = track.kept
        return outcome

    def _reference(
        self, scenario: Scenario, work: Path, data_dir: Path, outcome: ScenarioOutcome
    ) -> MeasuredReference | None:
        world = next(  # one rank per DP group of the first accepted launch
            (
                ph.dp
                for i, ph in enumerate(scenario.launches)
                if not ph.expect_failure and ph.dp <= scenario.canonical_replicas(i)
            ),
            1,
        )
        ref = Scenario(
            data=scenario.data,
            pipeline=replace(scenario.pipeline, aggregation="store"),
            launches=(Launch(world, scenario.reference_steps + reference_margin(scenario)),),
            name=f"{scenario.name}-reference",
            backend=scenario.backend,
        )
        key = ref.to_json()
        if key in self.reference_cache:
            return self.reference_cache[key]
        out = work / "reference"
        out.mkdir(mode=0o700)
        spec = workload_spec(ref, 0, out, data_dir)
        deadline = self._flat_deadline()
        launched_at = time.monotonic()
        result = self._launch(
            f"s{self._count}-reference", spec, world, "standalone", deadline_s=deadline.seconds
        )
        returned_at = time.monotonic()
        passed(result, deadline)
        records = read_phase(out, world)
        outcome.reference = PhaseRun(
            -1,
            ref.launches[0],
            spec,
            result,
            records,
            ckpt_oracle.CheckpointVerdict(ok=True),
            deadline=deadline,
        )
        if not result.ok:
            # A reference launch that failed in a way the harness cannot describe (its agent
            # died before any rank ran, say), or that hung before its ranks began, says
            # nothing about Zephon.
            undescribed = undescribed_failure(
                "the reference run", result
            ) or group_never_formed("the reference run", result, records)
            if undescribed is not None:
                outcome.harness_problems.append(undescribed)
            else:
                outcome.problems.append(failed_launch(Area.REFERENCE, result))
            return None
        timing = measure_reference(records, launched_at, returned_at, os.getloadavg()[0])
        measured = self.reference_cache[key] = MeasuredReference(records, timing)
        return measured


def passed(result: GroupResult, deadline: Deadline, formation: Formation | None = None) -> None:
    """A launch that passed its deadline says why the deadline was that long, in every
    summary of it (the problems and harness problems that quote one, a finding's evidence)."""
    if not result.timed_out:
        return
    if formation is not None and result.formed_s is None and result.cut_short is None:
        result.notes.append(
            f"its group never formed: {formation.to_form_s:.0f}s to form from the start; "
            f"had it formed, {deadline.describe()}"
        )
        return
    result.notes.append(deadline.describe(result.formed_s))


def formation_of(
    deadline: Deadline, out: Path, world_size: int, before_s: float | None = None
) -> Formation | None:
    """Count a derived deadline from the launch's group formation (every rank began: its
    first record), not its start (``runner.deadlines``, "Launch deadlines"); ``before_s``:
    the most the group may take to form (the ceiling where None or higher)."""
    after = deadline.after_formation_s
    if after is None or after <= 0:
        return None
    ceiling = deadline.ceiling.seconds
    return Formation(every_rank_began(out, world_size), after, ceiling, before_s=before_s)

