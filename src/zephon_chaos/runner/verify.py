"""Judging every merged checkpoint free-running ranks got, by resuming it.

Ranks that run free and retry alone (``independent`` beside a lag, which may drift them whole
checkpoint intervals apart) can get different merged checkpoints of one index: a late rank's
call joins whichever round of its peer is open, a retry of the same checkpoint or a later
one. Which one it finds is a race no oracle can predict, and need not: Zephon promises that a
merged checkpoint resumes to the documented batches. So each distinct merged checkpoint any
rank got (its ``checkpoint`` record holds the digest; every rank keeps its own copy,
``WorkloadSpec.keeps_own_copy``) is resumed by a short launch of its own, on the launch's
world size and on another, and its lane streams are compared with the reference at the
positions the ranks that got it had reached (their records' lane counts).

The scenario's own flow is untouched: the next launch restores what ``surviving_checkpoint``
says, and the verification launches hand nothing on. At most :data:`MAX_CHECKPOINTS`
checkpoints x :data:`MAX_WORLDS` world sizes run per launch; the rest are told as left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from zephon_chaos.harness_problem import HarnessProblem
from zephon_chaos.launch import GroupResult
from zephon_chaos.oracles.global_batches import LaneStreams, Verdict, compare, lane_streams
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner.checks import failed_launch, group_never_formed, judged_by_resuming
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import RankRecord, read_phase
from zephon_chaos.workload.spec import WorkloadSpec

if TYPE_CHECKING:
    from zephon_chaos.runner.outcome import PhaseRun, ScenarioOutcome

VerifyLauncher = Callable[[str, WorkloadSpec, int], GroupResult]
"""Runs one verification launch: its name, its spec, its world size (the runner's launcher)."""

VERIFY_STEPS = 2
"""Global steps a verification launch draws after restoring: enough to show each lane picks
up where the checkpoint says, short enough to cost little beside its launch."""
MAX_CHECKPOINTS = 2
"""Distinct merged checkpoints of one launch resumed at most (the first ones returned)."""
MAX_WORLDS = 2
"""World sizes each is resumed on at most: the launch's own, and another."""


def reference_margin(scenario: Scenario) -> int:
    """Global steps the reference runs beyond the scenario's own, so that a checkpoint taken
    at a launch's end is still compared over :data:`VERIFY_STEPS` when resumed."""
    return VERIFY_STEPS if any(judged_by_resuming(ph) for ph in scenario.launches) else 0


@dataclass(frozen=True)
class Returned:
    """One merged checkpoint as ranks got it: its digest, the first (index, rank) that got
    it (whose copy is resumed), every (rank, index) that got it, and per lane the batches
    delivered since the run's start that those ranks had reached."""

    digest: str
    index: int
    rank: int
    path: Path
    positions: Mapping[int, int] = field(hash=False)
    got: tuple[tuple[int, int], ...] = ()

    @property
    def mid_window(self) -> bool:
        """Its lanes stand at different positions (a mid-window or a drifted merge)."""
        return len(set(self.positions.values())) > 1

    def describe(self) -> str:
        first = (self.rank, self.index)
        also = [f"rank {r}'s checkpoint {i}" for r, i in self.got if (r, i) != first]
        return f"checkpoint {self.index} as returned to rank {self.rank}" + (
            f" (also {', '.join(also)})" if also else ""
        )


@dataclass(frozen=True)
class Target:
    """One verification launch: ``returned`` resumed on ``world_size`` ranks of ``tp``."""

    returned: Returned
    world_size: int
    tp: int = 1

    @property
    def dp(self) -> int:
        return self.world_size // self.tp


@dataclass(frozen=True)
class Unjudged:
    """A merged checkpoint no verification launch resumes, and why (a value, told as text)."""

    digest: str
    index: int
    rank: int
    why: str


@dataclass(frozen=True)
class VerifyPlan:
    targets: tuple[Target, ...] = ()
    unjudged: tuple[Unjudged, ...] = ()
    problems: tuple[Problem, ...] = ()
    """What the records alone show wrong: one merged checkpoint returned at two positions."""


def returned_checkpoints(
    records: Sequence[RankRecord], spec: WorkloadSpec, lanes: int, phase: int
) -> tuple[list[Returned], list[Unjudged], list[Problem]]:
    """Each distinct merged checkpoint the ranks got, in the order first returned (by index,
    then rank); those that cannot be resumed (no copy on disk, lanes no rank that got it
    owns); and a digest two ranks got with different positions for one lane."""
    got: dict[str, list[tuple[int, int, Mapping[int, int]]]] = {}
    for rec in sorted(records, key=lambda r: r.rank):
        for ev in rec.checkpoints:
            if ev.ok and ev.digest:
                got.setdefault(ev.digest, []).append((ev.index, rec.rank, ev.lane_counts))
    out: list[Returned] = []
    unjudged: list[Unjudged] = []
    problems: list[Problem] = []
    for digest, holders in sorted(got.items(), key=lambda kv: min(h[:2] for h in kv[1])):
        index, rank, _ = min(holders, key=lambda h: h[:2])
        positions: dict[int, int] = {}
        for i, r, counts in holders:
            for lane, n in sorted(counts.items()):
                if positions.setdefault(int(lane), n) != n:
                    problems.append(
                        Problem(
                            Area.VERIFY,
                            ProblemKind.INCONSISTENT,
                            f"phase {phase}: merged checkpoint {digest[:12]} was returned to "
                            f"rank {r} (checkpoint {i}) with lane {lane} at {n} batches, and "
                            f"to another rank with it at {positions[int(lane)]}",
                            phase,
                            i,
                            r,
                        )
                    )
        ordered = sorted(holders, key=lambda h: h[:2])
        copy = next(
            (
                (i, r, spec.rank_checkpoint_path(i, r))
                for i, r, _ in ordered
                if spec.rank_checkpoint_path(i, r).exists()
            ),
            None,
        )
        unowned = sorted(set(range(lanes)) - set(positions))
        if copy is None:
            unjudged.append(Unjudged(digest, index, rank, "no rank's copy of it is on disk"))
        elif unowned:
            unjudged.append(
                Unjudged(digest, index, rank, f"lanes {unowned} are no holder's: position unknown")
            )
        else:
            holders_of = tuple((r, i) for i, r, _ in ordered)
            out.append(Returned(digest, copy[0], copy[1], copy[2], positions, holders_of))
    return out, unjudged, problems


def verify_worlds(phase: Launch, c: int, next_phase: Launch | None) -> list[tuple[int, int]]:
    """(world size, tp) to resume on: the launch's own, then the next launch's if it differs
    and Zephon accepts it, else one rank fewer, else one more (within C)."""
    own = (phase.world_size, phase.tp)
    others: list[tuple[int, int]] = []
    if next_phase is not None and not next_phase.expect_failure and next_phase.dp <= c:
        others.append((next_phase.world_size, next_phase.tp))
    others += [(phase.world_size - 1, 1), (phase.world_size + 1, 1)]
    other = next((w for w in others if w != own and w[0] >= 1 and w[0] // w[1] <= c), None)
    return [own, *([other] if other else [])][:MAX_WORLDS]


def plan(run: PhaseRun, c: int, next_phase: Launch | None) -> VerifyPlan:
    """What to resume after launch ``run``: each distinct merged checkpoint its ranks got (at
    most :data:`MAX_CHECKPOINTS`) on each of :func:`verify_worlds`; empty unless the launch
    is :func:`judged_by_resuming`."""
    if not judged_by_resuming(run.phase):
        return VerifyPlan()
    returned, unjudged, problems = returned_checkpoints(run.records, run.spec, c, run.index)
    worlds = verify_worlds(run.phase, c, next_phase)
    targets = tuple(Target(r, w, tp) for r in returned[:MAX_CHECKPOINTS] for w, tp in worlds)
    over = [
        Unjudged(r.digest, r.index, r.rank, f"over the bound of {MAX_CHECKPOINTS} a launch")
        for r in returned[MAX_CHECKPOINTS:]
    ]
    return VerifyPlan(targets, tuple(unjudged + over), tuple(problems))


@dataclass
class Verification:
    """One verification launch and its verdict: a merged checkpoint resumed on ``target``."""

    phase: int
    target: Target
    spec: WorkloadSpec
    result: GroupResult
    records: list[RankRecord]
    verdict: Verdict | None = None
    problems: list[Problem] = field(default_factory=list)

    def describe(self) -> str:
        what = f"phase {self.phase}: {self.target.returned.describe()}, resumed on " + (
            f"{self.target.world_size} rank(s)"
        )
        if self.verdict is None:
            return f"{what}: {'; '.join(map(str, self.problems)) or 'not judged'}"
        return f"{what}: {self.verdict.describe()}"


def verification_spec(
    scenario: Scenario, run: PhaseRun, target: Target, out_dir: Path, n: int
) -> WorkloadSpec:
    """A short unfaulted launch restoring ``target``'s copy, under its own run id."""
    base = run.spec
    return replace(
        WorkloadSpec(),
        data=base.data,
        pipeline=replace(
            base.pipeline, run_id=f"{base.pipeline.run_id}-verify{n}", aggregation="store"
        ),
        steps=VERIFY_STEPS,
        restore_from=str(target.returned.path),
        persist_format=base.persist_format,
        out_dir=str(out_dir),
        data_dir=base.data_dir,
        sync="lockstep",
        tp=target.tp,
        backend=base.backend,
    )


def judge(
    target: Target, records: list[RankRecord], reference: list[RankRecord], relaid: bool
) -> Verdict:
    """The verification launch's lane streams against the reference's, each lane from the
    position the ranks that got the checkpoint had reached: exactly, unless a checkpoint with
    lanes at different positions was resumed onto other DP groups (the mid-window contract).
    Over finite data a lane ends where the reference's does."""
    ref = lane_streams(reference)
    positions = target.returned.positions
    want: LaneStreams = {
        lane: ref.get(lane, [])[pos : pos + VERIFY_STEPS] for lane, pos in positions.items()
    }
    expected = {lane: len(batches) for lane, batches in want.items()}
    actual = lane_streams(records, None, target.tp)
    exact = not (relaid and target.returned.mid_window)
    verdict = compare(want, actual, expected, exact=exact)
    verdict.problems = [replace(p, area=Area.VERIFY) for p in verdict.problems]
    return verdict


def verify_run(
    launch: VerifyLauncher,
    scenario: Scenario,
    run: PhaseRun,
    reference: list[RankRecord],
    outcome: ScenarioOutcome,
) -> None:
    """Resume each merged checkpoint launch ``run``'s ranks got (:func:`plan`), judge each
    verification launch, and record it in ``outcome`` (its problems, area ``verify``)."""
    i = run.index
    c = scenario.canonical_replicas(i)
    following = scenario.launches[i + 1] if i + 1 < len(scenario.launches) else None
    planned = plan(run, c, following)
    outcome.problems += list(planned.problems)
    outcome.unjudged += [(i, u) for u in planned.unjudged]
    work = Path(run.spec.out_dir).parent
    for n, target in enumerate(planned.targets):
        out = work / f"phase{i}-verify{n}"
        out.mkdir(mode=0o700)
        spec = verification_spec(scenario, run, target, out, n)
        result = launch(f"{work.name}-phase{i}-verify{n}", spec, target.world_size)
        records = read_phase(out, target.world_size)
        done = Verification(i, target, spec, result, records)
        outcome.verifications.append(done)
        never: HarnessProblem | None = group_never_formed(
            f"phase {i}'s verification {n}", result, records
        )
        if never is not None:
            outcome.harness_problems.append(never)
            continue
        if not result.ok:
            failed = failed_launch(Area.VERIFY, result, i)
            done.problems.append(
                replace(failed, text=f"{target.returned.describe()}, resumed on "
                f"{target.world_size} rank(s): {failed.text}", checkpoint=target.returned.index)
            )
        else:
            relaid = target.dp != run.phase.dp
            done.verdict = judge(target, records, reference, relaid)
            done.problems += [
                replace(
                    p,
                    phase=i,
                    checkpoint=target.returned.index,
                    text=f"phase {i}: {target.returned.describe()}, resumed on "
                    f"{target.world_size} rank(s): {p.text}",
                )
                for p in done.verdict.found()
            ]
        outcome.problems += done.problems
