"""Executing a scenario's ``StoreFault``: the harness-hosted store stalled, killed, restarted.

The store of aggregation ``store_explicit`` runs in a process of its own
(:class:`~zephon_chaos.launch.store_process.StoreProcess`) and outlives the launches. A fault
is timed by a checkpoint-round point: the interposer of the rank that writes it (the leader;
a follower for ``ack``) fires an ``await`` trigger right before the write, tells the harness
on the control channel and waits; a watcher thread hears it, acts on the store process
(SIGSTOP and, ``stall_s`` later, SIGCONT; SIGKILL; SIGKILL and an empty store on the same
port), and releases the rank, whose write then meets the faulted store.

After the launch the faulted round is judged by :func:`zephon_chaos.oracles.faults.judge`:
it completes, or fails on every rank with a cause within the bound. The evidence is the
store process's own state changes (``StoreProcess.history``: the kernel's ``T``, an exit
status, the new PID) and the interposer's ``held``/``released`` events. A killed store is
restarted, empty, before the next launch, which resumes from the last surviving checkpoint.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from zephon_chaos.faults.control import InterposerControl
from zephon_chaos.faults.interposer import read_events
from zephon_chaos.launch.store_process import StoreAction, StoreEvent, StoreProcess
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.oracles.checkpoints import lost as lost_checkpoints
from zephon_chaos.problem import Area, Problem, ProblemKind, found_in
from zephon_chaos.scenario_rules import FOLLOWER_POINTS, round_point
from zephon_chaos.workload.spec import PhaseTrigger, WorkloadSpec

ENDED = {"kind": "launch_ended", "action": "await"}
"""What the runner sends its own watcher once the launch returned (wakes a waiting watcher)."""
STORE_CAUSES: tuple[str, ...] = (
    *fault_oracle.CAUSES,
    "Connection",
    "connect",
    "recv",
    "Broken pipe",
)
"""Errors that name a store that went away: c10d's words for a closed or refused socket."""
HOLD_S = 60.0
"""How long the rank waits for the harness to act: far beyond a restart's milliseconds."""


def writer_of(point: str) -> int:
    """The rank whose interposer times a fault at ``point``: the leader, or rank 1 for a
    follower-only point."""
    return 1 if point in FOLLOWER_POINTS else 0


@dataclass
class StoreFaultLaunch(LaunchFault):
    """One launch with a hosted-store fault: its trigger, watcher, evidence, verdict."""

    fault: Any
    """The scenario's ``StoreFault``."""
    store: StoreProcess
    timeout_s: float
    evidence: list[str] = field(default_factory=list)
    verdict: fault_oracle.FaultVerdict | None = None
    acted: list[StoreEvent] = field(default_factory=list)
    """What the watcher did to the store, in order (the store's own record of it)."""
    watch_error: str = ""
    _control: InterposerControl | None = field(default=None, repr=False)
    _ended: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def point(self) -> tuple[str, int]:
        point = round_point(self.fault.at)
        assert point is not None and point[0] != "start", "a store fault needs a round point"
        return point

    @property
    def index(self) -> int:
        """The checkpoint the fault hits: round n is checkpoint n - 1."""
        return self.point[1] - 1

    def prepare(self, spec: WorkloadSpec) -> WorkloadSpec:
        """``spec`` with the ``await`` trigger on the point's writer and the control channel."""
        name, n = self.point
        self._control = InterposerControl()
        trigger = PhaseTrigger(
            writer_of(name), name, "await", occurrence=n, hold_timeout_s=HOLD_S
        )
        return replace(spec, triggers=(*spec.triggers, trigger), control=self._control.name)

    @contextlib.contextmanager
    def watching(self, deadline_s: float) -> Iterator[None]:
        """Around the launch: act on the store when the point comes; a stalled store is
        always continued, and the watcher ended, when the launch returns."""
        control = self._control
        assert control is not None, "prepare() first"
        try:
            with control.watched(
                self._watch, deadline_s, ENDED, "zc-store-fault", on_end=self._ended.set
            ):
                yield
        finally:
            self._control = None
            actions = {e.action for e in self.acted}
            stalled = StoreAction.STOPPED in actions and StoreAction.CONTINUED not in actions
            if stalled and self.store.serving:
                self.acted.append(self.store.cont())

    def _watch(self, control: InterposerControl, deadline_s: float) -> None:
        name, n = self.point
        try:
            heard = control.expect(deadline_s, action="await")
            if heard.event.get("kind") == ENDED["kind"]:
                self.watch_error = "the launch ended before the rank reached the point"
                return
            if (heard.event.get("phase"), heard.event.get("n")) != (name, n):
                self.watch_error = f"heard another point than {name}#{n}: {heard.event}"
                heard.release()
                return
            action = self.fault.action
            if action == "sigstop":
                self.acted.append(self.store.stop())
                heard.release()
                self._ended.wait(self.fault.stall_s)  # the stall's length, cut short at the end
                self.acted.append(self.store.cont())
            elif action == "kill":
                self.acted.append(self.store.kill())
                heard.release()
            else:
                self.acted.append(self.store.kill())
                self.acted.append(self.store.restart())
                heard.release()
        except (TimeoutError, OSError, RuntimeError, ValueError) as exc:
            self.watch_error = f"{type(exc).__name__}: {exc}"

    def judge(self, run: Any) -> list[Problem]:
        """Problems of the launch: a fault without evidence, a checkpoint due before the fault
        lost, or the fault oracle's finding on the faulted round."""
        name, n = self.point
        problems: list[Problem] = []
        writer = writer_of(name)
        events = [
            e
            for e in read_events(run.spec.out_dir, writer)
            if e.get("phase") == name and e.get("n") == n and e.get("action") == "await"
        ]
        # ``held`` is fsynced before the harness hears of it; ``released`` may never be written
        # (a peer failed at once and torchrun ended the waiting rank first).
        held = [e for e in events if e.get("kind") == "held"]
        released = next((e.get("how") for e in events if e.get("kind") == "released"), None)
        wanted = {
            "sigstop": (StoreAction.STOPPED, StoreAction.CONTINUED),
            "kill": (StoreAction.KILLED,),
            "restart": (StoreAction.KILLED, StoreAction.RESTARTED),
        }[self.fault.action]
        done = tuple(e.action for e in self.acted)
        if not held or done != wanted:
            problems.append(
                Problem(
                    Area.FAULT,
                    ProblemKind.NO_EVIDENCE,
                    f"store fault {self.fault.action} at {self.fault.at} left no evidence "
                    f"(rank {writer} waited at the point: {bool(held)}; store: "
                    f"{[a.value for a in done]}; {self.watch_error or 'no watcher error'})",
                    checkpoint=self.index,
                    rank=writer,
                ).in_phase(run.index)
            )
            return problems
        self.evidence.append(
            f"rank {writer}'s interposer waited at its {name} write #{n} while the harness "
            f"acted ({released or 'ended before its release'})"
        )
        self.evidence += [e.describe() for e in self.acted]
        for j in lost_checkpoints(run.checkpoints.facts, self.index):
            problems.append(
                Problem(
                    Area.FAULT,
                    ProblemKind.LOST_CHECKPOINT,
                    f"checkpoint {j}, due before the store fault at {self.fault.at}, "
                    "did not complete",
                    checkpoint=j,
                ).in_phase(run.index)
            )
        self.verdict = fault_oracle.judge(
            run.records,
            run.result,
            index=self.index,
            canonical_replicas=run.spec.pipeline.canonical_replicas,
            timeout_s=self.timeout_s,
            causes=STORE_CAUSES,
        )
        self.verdict.evidence[:0] = self.evidence
        problems += found_in(run.index, self.verdict)
        return problems

    def ends(self, run: Any) -> bool:
        """A failed launch was the store fault's doing: the next launch runs against the
        same store (restarted if killed) from the last checkpoint that survived."""
        return not run.result.ok

    def stalled_s(self) -> float:
        """How long the store stayed stopped (0 without a SIGSTOP)."""
        stops = [e.at for e in self.acted if e.action is StoreAction.STOPPED]
        conts = [e.at for e in self.acted if e.action is StoreAction.CONTINUED]
        return conts[0] - stops[0] if stops and conts else 0.0
