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
from typing import Any

from zephon_chaos.harness_problem import HarnessProblem, undescribed_failure
from zephon_chaos.launch import GroupResult, LaunchSpec, TorchrunGroup
from zephon_chaos.launch.leftover_round import LeftoverRound, close_before_relaunch
from zephon_chaos.oracles import checkpoints as ckpt_oracle
from zephon_chaos.oracles import dp_groups as dp_oracle
from zephon_chaos.oracles import liveness as liveness_oracle
from zephon_chaos.oracles import policies as policy_oracle
from zephon_chaos.oracles.global_batches import (
    PhaseRecords,
    Verdict,
    assemble,
    compare,
    lane_streams,
)
from zephon_chaos.problem import Area, Kind, Problem
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
    fault: Any = None
    """A faulted launch's evidence and verdict: a link fault's
    (``faults.scenario_proxy.FaultedLaunch``) or a round-point rank fault's
    (``faults.round_faults.RoundFaultLaunch``)."""
    liveness: liveness_oracle.LivenessVerdict | None = None
    """Zephon's timing promises on this launch: measured waits, propagation, problems."""
    policy: policy_oracle.PolicyVerdict | None = None
    """What the launch's checkpoint policy promises: each round's outcome by arrival, skip's."""
    leftover_round: LeftoverRound | None = None
    """A round an earlier launch left open in this launch's store namespace, which the harness
    closed before this launch (``launch.leftover_round``)."""
    held: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    """Per rank, when a toxic on its store link held data back (monotonic clock): the
    network's time, which the timing oracles do not count against Zephon."""

    @property
    def restore_index(self) -> int | None:
        """Index of the checkpoint the next phase restores: the last that survived."""
        return surviving_checkpoint(self.checkpoints.facts)


def surviving_checkpoint(facts: list[ckpt_oracle.CheckpointFacts]) -> int | None:
    """The last checkpoint rank 0 completed (so persisted) that no rank saw fail.

    Rank 0 records a checkpoint as completed only after persisting it; followers may record
    one that rank 0 never finished (a fault on the leader's link at ``outcome``), and that
    one has no file to restore from. Under ``lockstep`` retry and ``skip`` the ranks agree
    before rank 0 persists, so this is the last checkpoint every rank got: under ``skip`` the
    successful one after a skipped one, never the skipped one.
    """
    done = [f.index for f in facts if not f.failed and 0 in f.ok_ranks]
    return max(done) if done else None


@dataclass(frozen=True)
class ResumeFact:
    phase: int
    from_world: int
    to_world: int
    mid_window: bool
    from_tp: int = 1
    to_tp: int = 1

    @property
    def resized(self) -> bool:
        return self.from_world != self.to_world

    @property
    def relaid(self) -> bool:
        """The lanes changed hands: the number of DP groups, which own them, changed."""
        return self.from_world // self.from_tp != self.to_world // self.to_tp


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    reference: PhaseRun | None
    phases: list[PhaseRun] = field(default_factory=list)
    verdict: Verdict | None = None
    problems: list[Problem] = field(default_factory=list)
    scenario_file: Path | None = None
    resumes: list[ResumeFact] = field(default_factory=list)
    """Every launch that restored a checkpoint: from which world size, mid-window or not."""
    harness_problems: list[HarnessProblem] = field(default_factory=list)
    """Failures the harness could not describe: its own problems, not the code under test's."""

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and not self.harness_problems
            and (self.verdict is None or self.verdict.ok)
        )

    def report(self) -> str:
        lines = [self.scenario.summary()]
        for run in ([self.reference] if self.reference else []) + self.phases:
            lines.append(f"  {run.result.summary().splitlines()[0]}")
        lines += [f"  problem: {p}" for p in self.problems]
        lines += [f"  {h.describe()}" for h in self.harness_problems]
        if self.verdict is not None:
            lines.append(self.verdict.describe())
        if self.scenario_file is not None:
            lines.append(f"replay: zephon-chaos replay {shlex.quote(str(self.scenario_file))}")
        return "\n".join(lines)


def cli_launcher(root: Path) -> Launcher:
    """Launch through ``python -m torch.distributed.run``, each group under ``root``."""

    def launch(spec: LaunchSpec) -> GroupResult:
        if spec.hosts > 1:
            from zephon_chaos.launch.netns_group import run_on_hosts

            return run_on_hosts(spec, root / spec.name)
        with TorchrunGroup(spec, root / spec.name) as group:
            return group.run()

    return launch


def workload_spec(scenario: Scenario, index: int, out_dir: Path, data_dir: Path) -> WorkloadSpec:
    phase = scenario.phases[index]
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
        retry=phase.retry,
        sync=phase.sync,
        tp=phase.tp,
        lags=phase.lags,
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
        reference_cache: dict[str, list[RankRecord]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.launcher = launcher or cli_launcher(self.root)
        self.deadline_s = deadline_s
        self.reference_cache = {} if reference_cache is None else reference_cache
        self._count = 0

    deadline_cap: Callable[[], float] | None = None
    """Caps each launch's deadline at launch time (an explorer's remaining budget)."""

    def _deadline(self) -> float:
        cap = self.deadline_cap
        return self.deadline_s if cap is None else min(self.deadline_s, cap())

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
    """torchrun ``--max-restarts`` of the launch being started (``Phase.max_restarts``)."""

    def open_proxy_faults(self) -> Any:
        """A Toxiproxy session for the scenario's proxy-faulted phases (closed at its end)."""
        from zephon_chaos.faults.scenario_proxy import ProxyFaultSession

        return ProxyFaultSession()

    def _launch(
        self,
        name: str,
        spec: WorkloadSpec,
        world_size: int,
        path: str,
        hosts: int = 1,
        deadline_s: float | None = None,
    ) -> GroupResult:
        spec_file = Path(spec.out_dir) / "spec.json"
        spec.write(spec_file)
        return self.launcher(
            LaunchSpec(
                entry="zephon_chaos.workload",
                module=True,
                args=[str(spec_file)],
                nproc=world_size // hosts,
                nnodes=hosts,
                hosts=hosts,
                path=path,  # type: ignore[arg-type]
                deadline_s=self._deadline() if deadline_s is None else deadline_s,
                name=name,
                max_restarts=self._launch_restarts,
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
        track = _Resume(resumes=outcome.resumes)
        watching = contextlib.ExitStack()  # a hosted-store fault's watcher, per launch
        store_host = None
        proxy_faults = None
        try:
            for i, phase in enumerate(scenario.phases):
                out = work / f"phase{i}"
                out.mkdir(mode=0o700)
                spec = workload_spec(scenario, i, out, data_dir)
                spec = replace(spec, restore_from=track.restore_from)
                leftover = None
                if scenario.pipeline.aggregation == "dir":
                    spec = replace(spec, aggregate_dir=str(out / "aggregate"))
                elif scenario.pipeline.aggregation == "store_explicit":
                    if store_host is None:
                        faults = any(ph.store_faults for ph in scenario.phases)
                        store_host = self.open_store_process(work) if faults else self.open_store()
                    else:
                        if not getattr(store_host, "serving", True):
                            store_host.restart()  # killed by the last launch's fault: empty
                        # Every participant of the launches before has stopped: clean up a
                        # round one of them left open, as Zephon leaves that to the operator.
                        leftover = close_before_relaunch(store_host.endpoint, spec)
                    spec = replace(spec, store_uri=f"torch://{store_host.endpoint}")
                faulted = None
                stored = None
                if phase.store_faults:
                    from zephon_chaos.faults.hosted_store import StoreFaultLaunch

                    timeout_s = spec.pipeline.aggregate_timeout_s
                    stored = StoreFaultLaunch(phase.store_faults[0], store_host, timeout_s)
                    spec = stored.prepare(spec)
                    watching.enter_context(stored.watching(self._deadline()))
                if phase.max_restarts:
                    spec = replace(spec, resume_on_restart=True)
                self._launch_restarts = phase.max_restarts
                deadline = self._deadline()
                if phase.proxy_faults:
                    proxy_faults = proxy_faults or self.open_proxy_faults()
                    spec, faulted = proxy_faults.prepare(spec, phase.proxy_faults, phase.world_size)
                    deadline = min(deadline, stall_deadline_s(phase.proxy_faults, spec) or deadline)
                rounds = round_fault_launch(phase, spec.pipeline.aggregate_timeout_s)
                if rounds is not None:
                    spec = rounds.prepare(spec)
                with rounds.watching(deadline) if rounds else contextlib.nullcontext():
                    result = self._launch(
                        f"s{self._count}-phase{i}",
                        spec,
                        phase.world_size,
                        phase.launch,
                        phase.hosts,
                        deadline,
                    )
                watching.close()
                self._launch_restarts = 0
                if phase.max_restarts and phase.rank_faults:
                    # torchrun restarted the workers: attempt 0 up to the checkpoint attempt 1
                    # resumed is kept, and attempt 1 is judged as the launch from here on.
                    out, spec = restarted_attempt(scenario, i, spec, result, track, outcome)
                    phase = replace(phase, rank_faults=())
                records = track.cumulative(read_phase(out, phase.world_size))
                outcome.problems += [p.in_phase(i) for p in dp_oracle.problems(records, phase.tp)]
                c = scenario.canonical_replicas(i)
                cps = ckpt_oracle.check(records, c, failures_judged=phase.retry == "skip")
                run = PhaseRun(i, phase, spec, result, records, cps)
                run.leftover_round = leftover
                if faulted is not None:
                    run.held = proxy_faults.held(faulted)
                outcome.phases.append(run)
                run.liveness = liveness_oracle.judge_run(run)
                outcome.problems += run.liveness.found()
                run.policy = policy_oracle.judge_run(run)
                outcome.problems += run.policy.found()
                if phase.expect_failure or phase.dp > c:
                    # Refused: the next phase restores what this one was given.
                    problems, undescribed = expected_failure_problems(i, phase, result)
                    outcome.problems += problems
                    outcome.harness_problems += undescribed
                    continue
                track.resumed(i, phase.world_size, phase.tp)
                if stored is not None:
                    run.fault = stored
                    outcome.problems += stored.judge(run)
                    if not result.ok:
                        # Failed by the store's fault: the next launch (against the same
                        # store, restarted empty if it was killed) restores the last survivor.
                        if run.restore_index is not None:
                            track.keep(run, run.restore_index)
                        continue
                if faulted is not None:
                    run.fault = faulted
                    outcome.problems += proxy_faults.judge(faulted, run)
                    proxy_faults.finish(faulted)
                    if not result.ok and not phase.rank_faults:
                        # Failed by its fault: the next phase restores the last complete one.
                        if run.restore_index is not None:
                            track.keep(run, run.restore_index)
                        continue
                if rounds is not None:
                    run.fault = rounds
                    outcome.problems += rounds.judge(run)
                    if not result.ok:
                        # Ended or failed by its fault: the next restores the last that survived.
                        if run.restore_index is not None:
                            track.keep(run, run.restore_index)
                        continue
                elif phase.rank_faults:
                    index = scenario.restore_index(i)
                    crashed = crash_problems(run, index, c)
                    outcome.problems += crashed
                    if index is not None and not crashed:
                        track.keep(run, index)
                    continue
                if not result.ok and not result.timed_out and run.policy.failed_by_arrival:
                    # Failed by Zephon's per-call budget (a rank called checkpoint() later than
                    # aggregate_timeout_s after another): the next launch restores the last
                    # checkpoint every rank got.
                    if run.restore_index is not None:
                        track.keep(run, run.restore_index)
                    continue
                skipped_all = phase.retry == "skip" and run.restore_index is None
                if result.ok and skipped_all and i < len(scenario.phases) - 1:
                    # Every checkpoint failed and was skipped: the next launch restores what
                    # this one restored, as after a launch its fault failed.
                    outcome.problems += [p.in_phase(i) for p in cps.problems]
                    continue
                if not result.ok:
                    outcome.problems.append(failed_launch(Area.LAUNCH, result, i))
                    return outcome
                outcome.problems += [p.in_phase(i) for p in cps.problems]
                if i == len(scenario.phases) - 1:
                    track.keep_all(run, range(c), reference)
                    break
                index = run.restore_index
                if index is None:
                    outcome.problems.append(
                        Problem(
                            Area.CHECKPOINT,
                            Kind.NONE,
                            f"phase {i} completed no checkpoint to restore from",
                            phase=i,
                        )
                    )
                    return outcome
                track.keep(run, index)
        finally:
            watching.close()
            if store_host is not None:
                self.close_store(store_host)
            if proxy_faults is not None:
                proxy_faults.close()
        if track.kept:
            ref_streams = lane_streams(reference)
            expected = {
                lane: min(n, len(ref_streams.get(lane, []))) for lane, n in track.expected.items()
            }
            outcome.verdict = compare(
                ref_streams, assemble(track.kept), expected, exact=track.exact
            )
        return outcome

    def _reference(
        self, scenario: Scenario, work: Path, data_dir: Path, outcome: ScenarioOutcome
    ) -> list[RankRecord] | None:
        world = next(  # one rank per DP group of the first accepted launch
            (
                ph.dp
                for i, ph in enumerate(scenario.phases)
                if not ph.expect_failure and ph.dp <= scenario.canonical_replicas(i)
            ),
            1,
        )
        ref = Scenario(
            data=scenario.data,
            pipeline=replace(scenario.pipeline, aggregation="store"),
            phases=(Phase(world_size=world, steps=scenario.reference_steps),),
            name=f"{scenario.name}-reference",
            backend=scenario.backend,
        )
        key = ref.to_json()
        if key in self.reference_cache:
            return self.reference_cache[key]
        out = work / "reference"
        out.mkdir(mode=0o700)
        spec = workload_spec(ref, 0, out, data_dir)
        result = self._launch(f"s{self._count}-reference", spec, world, "standalone")
        records = read_phase(out, world)
        outcome.reference = PhaseRun(
            -1, ref.phases[0], spec, result, records, ckpt_oracle.CheckpointVerdict(ok=True)
        )
        if not result.ok:
            outcome.problems.append(failed_launch(Area.REFERENCE, result))
            return None
        self.reference_cache[key] = records
        return records


def round_fault_launch(phase: Phase, timeout_s: float) -> Any:
    """The launch's round-point rank fault, ready to run (``faults.round_faults``), or None."""
    fault = next((f for f in phase.rank_faults if f.at_round), None)
    if fault is None:
        return None
    from zephon_chaos.faults.round_faults import RoundFaultLaunch

    return RoundFaultLaunch(fault, timeout_s)


def stall_deadline_s(faults: Any, spec: WorkloadSpec) -> float | None:
    """A short deadline for a launch whose link a ``timeout`` toxic stalls (a known Zephon
    defect blocks its store calls for good): ``faults.scenario_proxy.stall_deadline_s``."""
    from zephon_chaos.faults.scenario_proxy import stall_deadline_s as deadline_of

    return deadline_of(faults, spec.pipeline.aggregate_timeout_s)


def failed_launch(area: Area, result: GroupResult, phase: int | None = None) -> Problem:
    """A launch (``area``: a scenario's, or the reference run) that failed and should not
    have; its kind is ``timeout``, the first failure's error type, or ``failed``."""
    first = result.first_failure
    kind: str = Kind.TIMEOUT if result.timed_out else Kind.FAILED
    if not result.timed_out and first is not None and first.error_type:
        kind = first.error_type
    what = "the reference run" if phase is None else f"phase {phase}"
    return Problem(
        area,
        kind,
        f"{what} failed: {result.summary()}",
        phase=phase,
        rank=None if first is None else first.rank,
    )


def expected_failure_problems(
    index: int, phase: Phase, result: GroupResult
) -> tuple[list[Problem], list[HarnessProblem]]:
    """A phase meant to be refused must fail, and with the error it names: (problems of the
    code under test, failures the harness could not describe, which judge nothing)."""
    if result.ok:
        text = f"phase {index} was expected to fail but succeeded"
        return [Problem(Area.REFUSAL, Kind.ACCEPTED, text, phase=index)], []
    if result.timed_out:
        text = f"phase {index} was expected to fail with an error but hung until its deadline"
        return [Problem(Area.REFUSAL, Kind.HANG, text, phase=index)], []
    if not phase.expect_error:
        return [], []
    undescribed = undescribed_failure(index, result)
    if undescribed is not None:
        return [], [undescribed]
    first = result.first_failure
    assert first is not None  # undescribed_failure names a launch without one
    if phase.expect_error not in (first.error or ""):
        text = (
            f"phase {index} failed, but not with {phase.expect_error!r}: "
            f"first failure: rank {first.rank}: {first.error or first.status}"
        )
        return [Problem(Area.REFUSAL, Kind.WRONG_ERROR, text, phase=index, rank=first.rank)], []
    return [], []


@dataclass
class _Resume:
    """What the phases so far hand on: kept batches, lane counts, the checkpoint to restore."""

    kept: list[PhaseRecords] = field(default_factory=list)
    expected: dict[int, int] = field(default_factory=dict)
    """Per lane, the batches delivered up to the checkpoint restored next (since the start)."""
    restore_from: str | None = None
    taken_at: int | None = None
    taken_tp: int = 1
    taken_mid_window: bool = False
    exact: bool = True
    resumes: list[ResumeFact] = field(default_factory=list)

    def cumulative(self, records: list[RankRecord]) -> list[RankRecord]:
        """Lane counts of checkpoints since the run's start (Zephon's view), not the launch's."""
        for rec in records:
            for ev in rec.checkpoints:
                ev.lane_counts = {
                    lane: self.expected.get(lane, 0) + n for lane, n in ev.lane_counts.items()
                }
        return records

    def resumed(self, phase: int, world_size: int, tp: int = 1) -> None:
        if self.restore_from is None or self.taken_at is None:
            return
        fact = ResumeFact(
            phase, self.taken_at, world_size, self.taken_mid_window, self.taken_tp, tp
        )
        self.resumes.append(fact)
        if fact.mid_window and fact.relaid:  # same DP groups: each keeps its lanes' order
            self.exact = False

    def keep(self, run: PhaseRun, index: int) -> None:
        facts = next(f for f in run.checkpoints.facts if f.index == index)
        self.kept.append(
            PhaseRecords(run.phase.world_size, run.records, index + 1, run.phase.tp)
        )
        self.expected.update(facts.lane_counts)
        self.restore_from = str(run.spec.checkpoint_path(index))
        self.taken_at = run.phase.world_size
        self.taken_tp = run.phase.tp
        self.taken_mid_window = facts.mid_window

    def keep_all(self, run: PhaseRun, lanes: range, reference: list[RankRecord]) -> None:
        """The last phase: everything; each lane ``steps`` more, or all of it if both ran dry."""
        self.kept.append(PhaseRecords(run.phase.world_size, run.records, None, run.phase.tp))
        dry = all(r.exhausted_after is not None for r in run.records + reference)
        ref_lengths = {lane: len(b) for lane, b in lane_streams(reference).items()}
        for lane in lanes:
            if dry:
                self.expected[lane] = ref_lengths.get(lane, 0)
            else:
                self.expected[lane] = self.expected.get(lane, 0) + run.phase.steps


def crash_problems(run: PhaseRun, index: int | None, canonical_replicas: int) -> list[Problem]:
    """A phase with rank faults must end by its fault, after the checkpoints due before it."""
    i, result = run.index, run.result
    fired = [ev for rec in run.records for ev in rec.events if ev.get("kind") == "fault"]

    def crash(kind: Kind, text: str, checkpoint: int | None = None) -> Problem:
        return Problem(Area.CRASH, kind, text, phase=i, checkpoint=checkpoint)

    if result.ok:
        return [
            crash(
                Kind.NO_END,
                f"phase {i} was to end by its scheduled rank fault(s) "
                f"{list(run.phase.rank_faults)}, but the launch succeeded",
            )
        ]
    if not fired:
        text = f"phase {i} failed before its scheduled fault fired: {result.summary()}"
        return [crash(Kind.EARLY_FAILURE, text)]
    if index is None:
        return []
    facts = {f.index: f for f in run.checkpoints.facts}
    problems = []
    for j in range(index + 1):
        f = facts.get(j)
        where = f"phase {i}: checkpoint {j}, "
        if f is None or f.failed or 0 not in f.ok_ranks:
            text = f"{where}due before the fault, did not complete"
            problems.append(crash(Kind.LOST_CHECKPOINT, text, j))
        elif j < index and len(f.ok_ranks) != len(run.records):
            text = f"{where}before the fault, lacks some rank's record"
            problems.append(crash(Kind.CHECKPOINT, text, j))
        elif len(set(f.digests.values())) > 1:
            text = f"{where}before the fault, differs between ranks: {f.digests}"
            problems.append(crash(Kind.CHECKPOINT, text, j))
        elif any(c != list(range(canonical_replicas)) for c in f.covered.values()):
            text = f"{where}before the fault, does not cover all lanes: {f.covered}"
            problems.append(crash(Kind.CHECKPOINT, text, j))
    if not problems and not Path(run.spec.checkpoint_path(index)).exists():  # dcp: a folder
        text = f"phase {i}: rank 0 persisted no checkpoint {index} before the fault"
        problems.append(crash(Kind.LOST_CHECKPOINT, text, index))
    return problems


def restarted_attempt(
    scenario: Scenario,
    i: int,
    spec: WorkloadSpec,
    result: GroupResult,
    track: _Resume,
    outcome: ScenarioOutcome,
) -> tuple[Path, WorkloadSpec]:
    """Judge attempt 0 of a launch torchrun restarted and keep its batches up to the
    checkpoint attempt 1 resumed; return the folder and spec of the last attempt.

    Attempt 0's rank fault must have fired, its checkpoints before the fault completed and
    persisted (``faults.restart.latest_checkpoint`` is what attempt 1 restores), and every
    rank of attempt 1 must have restored that one.
    """
    from zephon_chaos.faults.restart import attempt_dir, restored_from

    phase, out = scenario.phases[i], Path(spec.out_dir)
    c = scenario.canonical_replicas(i)
    records = track.cumulative(read_phase(out, phase.world_size))
    run0 = PhaseRun(i, phase, spec, result, records, ckpt_oracle.check(records, c))
    where = f"phase {i}"

    def restart(kind: Kind, text: str, checkpoint: int | None = None) -> None:
        outcome.problems.append(Problem(Area.RESTART, kind, text, phase=i, checkpoint=checkpoint))

    if not any(ev.get("kind") == "fault" for rec in records for ev in rec.events):
        restart(Kind.FAULT_NEVER_FIRED, f"{where}: attempt 0's rank fault never fired")
    attempts = sorted(
        int(p.name.removeprefix("restart"))
        for p in out.glob("restart*")
        if p.name.removeprefix("restart").isdigit()
    )
    if not attempts:
        restart(Kind.NO_RESTART, f"{where}: torchrun restarted no worker: {result.summary()}")
        return out, spec
    kept = scenario.restart_kept(i)
    marks = sorted({(cp.step, cp.extra) for cp in phase.checkpoints})
    index = None if kept is None else marks.index((kept.step, kept.extra))
    expected_restore = spec.restore_from
    if index is not None:
        facts = {f.index: f for f in run0.checkpoints.facts}
        for j in range(index + 1):
            f = facts.get(j)
            if f is None or f.failed or 0 not in f.ok_ranks:
                restart(
                    Kind.LOST_CHECKPOINT,
                    f"{where}: checkpoint {j} of attempt 0, due before the fault, did not complete",
                    j,
                )
                return out, spec
        track.resumed(i, phase.world_size)
        track.keep(run0, index)
        expected_restore = str(spec.checkpoint_path(index))
    last = attempts[-1]
    later = replace(spec, out_dir=str(attempt_dir(out, last)), restore_from=expected_restore)
    restored = restored_from(attempt_dir(out, last), phase.world_size)
    if restored != {expected_restore}:
        restart(
            Kind.WRONG_RESTORE,
            f"{where}: attempt {last} restored {sorted(map(str, restored))}, not the latest "
            f"checkpoint attempt 0 persisted ({expected_restore})"
        )
    return attempt_dir(out, last), later
