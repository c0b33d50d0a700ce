"""Known hangs, as a launch is watched for them: a trigger and the frames that identify one.

Whoever knows a hang (the explorer's known defects) declares a :class:`HangSignature` and
injects it into a runner (``ScenarioRunner.hang_signatures``); the runner hands each launch a
``launch.hangwatch.HangWatch`` asking them, and the launch ends once the ranks have been
quiet for the quiet period, a signature's trigger has fired and their stacks match it. The
signature's predicates are the known defect's own (its ``explains`` reads the same frames),
so a launch cut short is judged exactly as the same launch at its deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zephon_chaos.diagnostics.frames import ThreadStack, parse_stacks
from zephon_chaos.launch.hangwatch import HangWatch, Stacks
from zephon_chaos.oracles.faults import failure_bound_s
from zephon_chaos.scenario import Launch
from zephon_chaos.workload.records import RankRecord, read_phase

WORKER_START_S = 60.0
"""Silence a healthy launch with worker processes (``runner: process``, ``mtp_mode``) may
keep while a replacement for a killed worker starts: it imports torch and writes nothing
(15-20 s for 8 workers on 2 quiet cores, ``tests/zephon/test_worker_death.py``; up to a
minute with the cores shared, as ``explore.config.WORKER_PROCESS_FACTOR`` measured)."""
QUIET_SLACK_S = 10.0
"""Room for a loaded machine's scheduling beyond the silences accounted for."""
PROOF_QUIET_S = 15.0
"""Quiet before the stacks are asked for a proof (``HangSignature.proof``), and between such
asks: a proof holds whatever the time, so this only keeps captures (which pause the ranks)
rare; a replacement worker still importing torch is just not proved yet."""


def quiet_period_s(timeout_s: float, worker_processes: bool) -> float:
    """The default quiet period of a launch: no progress for this long is no healthy wait.

    A rank writes a record for every batch and every checkpoint call, so the longest silence
    of a healthy rank is one call of ``checkpoint()``, which the liveness oracle bounds at
    ``3 T + 3 s`` (``oracles.faults.failure_bound_s``: a call longer than that is a violation
    by itself), plus, with worker processes, a replacement worker's start (``WORKER_START_S``)
    and some slack. At T = 30 s without workers: 103 s; with them: 163 s (of a 360 s
    deadline); at T = 180 s longer than any deadline, so such a launch keeps its deadline."""
    return (
        failure_bound_s(timeout_s) + (WORKER_START_S if worker_processes else 0.0) + (QUIET_SLACK_S)
    )


@dataclass(frozen=True)
class LaunchContext:
    """What a hang signature may read of a launch while it runs: its phase of the scenario,
    the folder its ranks write to, and the driver of its faults (a ``FaultedLaunch`` or a
    ``StoreFaultLaunch``; None without)."""

    phase: Launch
    out_dir: Path
    fault: Any = None

    def records(self) -> list[RankRecord]:
        """The ranks' records so far (flushed per step: a record is whole once written)."""
        return read_phase(self.out_dir, self.phase.world_size)


@dataclass(frozen=True)
class HangSignature:
    """A known hang: ``triggered`` (its cause acted in this launch: a child fault fired, a
    stalling toxic was installed) and ``stuck`` (a thread held for good by it)."""

    triggered: Callable[[LaunchContext], bool]
    stuck: Callable[[ThreadStack], bool]
    proof: Callable[[Mapping[str, Sequence[ThreadStack]]], bool] | None = None
    """Whether the stacks (by process: ``diagnostics.stacks.Who``) prove the hang, held for
    good whatever the time (every process that could release what the others wait for is
    gone); such a hang is ended after ``PROOF_QUIET_S`` of quiet, not the quiet period."""

    def matches(self, stacks: Mapping[str, Sequence[ThreadStack]], context: LaunchContext) -> bool:
        """The trigger fired and some process of the launch has a thread stuck so."""
        return self.triggered(context) and any(
            self.stuck(thread) for threads in stacks.values() for thread in threads
        )


def hang_watch(
    signatures: Mapping[str, HangSignature], context: LaunchContext, quiet_s: float
) -> HangWatch:
    """The watch a launch of ``context`` carries: armed once a signature's trigger fired, a
    capture recognised as the first signature (by id) its stacks match."""

    def armed() -> bool:
        return any(s.triggered(context) for s in signatures.values())

    def recognise(stacks: Stacks) -> str | None:
        parsed = {who: parse_stacks(text) for who, text in stacks.items()}
        return next((i for i, s in signatures.items() if s.matches(parsed, context)), None)

    provable = [(i, s, s.proof) for i, s in signatures.items() if s.proof is not None]

    def prove(stacks: Stacks) -> str | None:
        parsed = {who: parse_stacks(text) for who, text in stacks.items()}
        return next((i for i, s, proof in provable if s.triggered(context) and proof(parsed)), None)

    if not provable:
        return HangWatch(quiet_s, recognise, armed, watched=(context.out_dir,))
    early = min(PROOF_QUIET_S, quiet_s)
    return HangWatch(
        quiet_s, recognise, armed, watched=(context.out_dir,), prove=prove, early_s=early
    )
