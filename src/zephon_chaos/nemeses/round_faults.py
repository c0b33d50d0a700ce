"""Executing a scenario's rank faults timed by a checkpoint-round point, and judging them.

A ``RankFault`` whose ``at`` is a round point (``shard``, ``ack#2``: the rank's n-th write of
that point) becomes a ``PhaseTrigger`` on that rank: its interposer applies the action right
before the write (raise in the store call or file write, exit, SIGKILL, SIGTERM, SIGSTOP),
after fsyncing the ``fired`` event that is the evidence. The interposer is the store's
(``faults.interposer``) or, with aggregation ``dir``, that of the rank's round files
(``faults.dir_interposer``); both write the same events, so the judging below is one.

A SIGSTOP is the harness's to end. A watcher thread hears the rank's ``fired`` event on the
control channel, waits for the kernel's word that the rank stopped (state T), then for the
next logical event: the leader publishing that round's outcome, where the victim is a
follower stopped before it (``shard``, ``participants``); otherwise every other rank's first
call of that checkpoint having returned or raised (each rank says so on the channel,
``faults.control.CALL_ENDED``): what the others could do in the round without the victim is
done. If that never comes (a rank died, or waits on the victim), a bound of
``failure_bound_s(T)``, by which every other rank must have failed the round. Then SIGCONT,
checked against PID reuse. The stop is excused from the victim's durations.

After the launch the faulted round is judged by :func:`zephon_chaos.oracles.faults.judge`
(completed, failed with a cause within the bound, split, split resolved by a lockstep retry),
and the checkpoints before it must have survived: the runner restores the last that did.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from zephon_chaos.faults.control import CALL_ENDED, InterposerControl
from zephon_chaos.faults.interposer import read_events
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.nemeses.process import ProcessFaultError, StopEvidence, wait_stopped
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.oracles.checkpoints import lost as lost_checkpoints
from zephon_chaos.problem import Area, Problem, ProblemKind, found_in
from zephon_chaos.procs import ProcId, start_ticks
from zephon_chaos.scenario_rules import rank_point
from zephon_chaos.workload.spec import PhaseTrigger, RankFault, WorkloadSpec

ENDED = {"kind": "launch_ended"}
"""What the runner sends its own watcher once the launch returned (wakes a waiting watcher)."""
DEATH_WORDS = {"sigkill": "killed by SIGKILL", "sigterm": "killed by SIGTERM", "exit": "exited 17"}
"""What the wait status of a rank the fault ended must show."""
BEFORE_OUTCOME = ("shard", "participants")
"""Follower points after which the leader still publishes the round's outcome."""


def triggers_for(fault: RankFault) -> tuple[PhaseTrigger, ...]:
    """The fault's trigger, and for a follower's stop before the outcome, the leader's outcome
    as an observed event (what the harness waits for before its SIGCONT)."""
    point = rank_point(fault)
    if point is None:
        return ()
    name, n = point
    until = fault.until_attempt
    out = [PhaseTrigger(fault.rank, name, fault.action, occurrence=n, until_attempt=until)]
    if fault.action == "sigstop" and fault.rank != 0 and name in BEFORE_OUTCOME:
        out.append(
            PhaseTrigger(0, "outcome", "event", occurrence=n, when="after", until_attempt=until)
        )
    return tuple(out)


@dataclass
class Continued:
    """A SIGSTOP the harness saw land and ended: what released it, and when."""

    stop: StopEvidence
    after: str
    """``outcome``: the leader published the round's outcome; ``calls ended``: every other
    rank's call of the checkpoint ended; ``launch end``; ``bound``: the bound passed."""

    @property
    def stopped_s(self) -> float:
        end = self.stop.continued_at or self.stop.stopped_at
        return end - self.stop.stopped_at


@dataclass
class RoundFaultLaunch(LaunchFault):
    """One launch with a round-point rank fault: its trigger, stop watcher, evidence, verdict."""

    judges_rank_faults: ClassVar[bool] = True

    fault: RankFault
    timeout_s: float
    world_size: int = 2
    evidence: list[str] = field(default_factory=list)
    verdict: fault_oracle.FaultVerdict | None = None
    continued: Continued | None = None
    watch_error: str = ""
    _control: InterposerControl | None = field(default=None, repr=False)

    @property
    def point(self) -> tuple[str, int]:
        point = rank_point(self.fault)
        assert point is not None, "a RoundFaultLaunch needs a round-point fault"
        return point

    @property
    def index(self) -> int:
        """The checkpoint the fault hits: round n is checkpoint n - 1."""
        return self.point[1] - 1

    def prepare(self, spec: WorkloadSpec) -> WorkloadSpec:
        """``spec`` with the fault's triggers (and, for a stop, the control channel)."""
        spec = replace(spec, triggers=spec.triggers + triggers_for(self.fault))
        if self.fault.action == "sigstop":
            self._control = InterposerControl()
            spec = replace(spec, control=self._control.name)
        return spec

    @contextlib.contextmanager
    def watching(self, deadline_s: float) -> Iterator[None]:
        """Around the launch: continue the stopped rank (a SIGSTOP fault), end the watcher."""
        control = self._control
        if control is None:
            yield
            return
        try:
            with control.watched(self._watch, deadline_s, ENDED, "zc-round-stop"):
                yield
        finally:
            self._control = None

    def _watch(self, control: InterposerControl, deadline_s: float) -> None:
        name, n = self.point
        victim = self.fault.rank
        try:
            heard = control.expect_any(
                deadline_s, {"kind": "fired", "rank": victim, "action": "sigstop"}, ENDED
            )
            if heard.event.get("kind") == ENDED["kind"]:
                self.watch_error = "the launch ended before the rank stopped"
                return
            pid = int(heard.event["pid"])
            target = ProcId(pid, start_ticks(pid) or 0)
            stop = wait_stopped(target, deadline_s)
            bound = fault_oracle.failure_bound_s(self.timeout_s)
            after = "bound"
            if victim != 0 and name in BEFORE_OUTCOME:
                with contextlib.suppress(TimeoutError):
                    heard = control.expect_any(
                        bound, {"kind": "fired", "rank": 0, "phase": "outcome", "n": n}, ENDED
                    )
                    after = "outcome" if heard.event.get("kind") == "fired" else "launch end"
            else:
                with contextlib.suppress(TimeoutError):
                    after = self._others_ended(control, bound)
            if target.alive():
                os.kill(target.pid, signal.SIGCONT)
            self.continued = Continued(replace(stop, continued_at=time.monotonic()), after)
        except (TimeoutError, ProcessFaultError, OSError, ValueError, KeyError) as exc:
            self.watch_error = f"{type(exc).__name__}: {exc}"

    def _others_ended(self, control: InterposerControl, bound: float) -> str:
        """Wait, up to ``bound`` seconds, until every rank but the victim has ended its first
        call of the faulted checkpoint (``calls ended``) or the launch ended (``launch
        end``); TimeoutError past the bound."""
        deadline = time.monotonic() + bound
        waiting = set(range(self.world_size)) - {self.fault.rank}
        while waiting:
            ended = ({"kind": CALL_ENDED, "rank": r, "index": self.index} for r in waiting)
            heard = control.expect_any(deadline - time.monotonic(), ENDED, *ended)
            if heard.event.get("kind") == ENDED["kind"]:
                return "launch end"
            waiting.discard(int(heard.event["rank"]))
        return "calls ended"

    def judge(self, run: Any, *, attempt: int | None = None) -> list[Problem]:
        """Problems of the launch: a fault without evidence, a stop never seen, a checkpoint
        due before the fault lost, or the fault oracle's finding on the faulted round.

        ``attempt``: ``run`` is that attempt, which torchrun restarted after the fault ended it; the
        launch's wait statuses are its last attempt's, so this one's are unknown (torchrun's
        restart is the evidence that the fault ended it)."""
        fault, (name, n) = self.fault, self.point
        problems: list[Problem] = []

        def found(kind: ProblemKind, text: str, checkpoint: int | None = self.index) -> None:
            problem = Problem(Area.FAULT, kind, text, checkpoint=checkpoint, rank=fault.rank)
            problems.append(problem.in_phase(run.index))

        fired = [
            e
            for e in read_events(run.spec.out_dir, fault.rank)
            if e.get("kind") == "fired"
            and e.get("phase") == name
            and e.get("n") == n
            and e.get("action") == fault.action
        ]
        if fired:
            self.evidence.append(
                f"rank {fault.rank}'s interposer applied {fault.action} before its {name} "
                f"write #{n} ({fired[0].get('key')})"
            )
        else:
            found(
                ProblemKind.NO_EVIDENCE, f"rank fault {fault.action} at {fault.at} left no evidence"
            )
        excused: dict[int, float] = {}
        if fault.action == "sigstop":
            if self.continued is None:
                found(
                    ProblemKind.NO_EVIDENCE,
                    f"rank {fault.rank} was to stop at {fault.at} and be continued, but "
                    f"the harness never saw it stop: {self.watch_error or 'no event'}",
                )
            else:
                excused[fault.rank] = self.continued.stopped_s
                self.evidence.append(
                    f"rank {fault.rank} stopped (state {self.continued.stop.state}) and was "
                    f"continued after {self.continued.after}, "
                    f"{self.continued.stopped_s:.1f}s later"
                )
        for j in lost_checkpoints(run.checkpoints.facts, self.index):
            found(
                ProblemKind.LOST_CHECKPOINT,
                f"checkpoint {j}, due before the fault at {fault.at}, did not complete",
                j,
            )
        words = DEATH_WORDS.get(fault.action)
        if attempt is not None:
            self.evidence.append(
                f"torchrun restarted the workers after the fault ended attempt {attempt}"
            )
            words = "" if words else None
        self.verdict = fault_oracle.judge(
            run.records,
            None if attempt is not None else run.result,
            index=self.index,
            canonical_replicas=run.spec.pipeline.canonical_replicas,
            timeout_s=run.spec.pipeline.aggregate_timeout_s,
            faulted={fault.rank: words} if words is not None else None,
            excused_s=excused,
        )
        self.verdict.evidence[:0] = self.evidence
        problems += found_in(run.index, self.verdict)
        return problems

    def ends(self, run: Any) -> bool:
        """A failed launch was the fault's doing (its round, or the rank it ended)."""
        return not run.result.ok
