"""Executing a scenario's ``ProxyFault``s: proxies per launch, toxics at a logical point.

A phase with proxy faults runs with one proxy per rank in front of the aggregation store
(torchrun's, or with ``store_explicit`` the one the harness hosts: each rank points its proxy
at ``spec.store_uri`` instead, ``faults.placement``) on a Toxiproxy server this session starts
(``start_server``: a configured one, else the embedded one). ``ProxyFault.at`` says when the
fault acts:

* ``start``: the toxic is on the rank's link before the launch (``down``: the proxy is
  disabled, so the rank's pipeline cannot reach its store);
* a round phase (``announce``, ``shard``, ``participants``, ``outcome``, ``ack``), optionally
  ``phase#n`` for the rank's n-th such write (default 1): the rank's interposer adds the toxic
  to its own proxy (``down``: disables it) right before that write.

``ProxyFault.until`` says when it ends: ``never`` (the launch's end), or ``round_end``: the
rank removes the toxic (``down``: enables the proxy) itself, through the same API, once the
``checkpoint()`` call it fired in has returned or raised (``interposer.LinkHeals``).

After the launch the faulted checkpoint is judged by :mod:`zephon_chaos.oracles.faults`, with
the evidence that the fault acted: the proxy's link counters, the interposer's event; a healed
fault's next checkpoint call by :mod:`zephon_chaos.oracles.healing`.

A ``timeout`` toxic stalls its link: a known Zephon defect (``explore.known``) keeps store
calls on it blocked past any multiple of ``aggregate_timeout_s``, so a launch that waits for
the stalled rank (a lockstep retry's agreement) hangs. Such a launch runs under a short
deadline (:func:`stall_deadline_s`) rather than the explorer's, so it does not eat the budget.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any

from zephon_chaos.errors import InvalidInput
from zephon_chaos.faults.interposer import read_events
from zephon_chaos.faults.proxy.client import ProxyApiError, ToxiproxyClient
from zephon_chaos.faults.proxy.embedded import ToxiproxyServer, start_server
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.nemeses.store_proxies import DOWN, StoreProxies
from zephon_chaos.oracles import faults as fault_oracle
from zephon_chaos.oracles import healing as healing_oracle
from zephon_chaos.problem import Area, Problem, ProblemKind, found_in
from zephon_chaos.scenario_rules import STALLING_TOXICS
from zephon_chaos.workload.spec import ROUND_PHASES, PhaseTrigger, WorkloadSpec

STALL_MARGIN_S = 30.0
"""Room for the launch's start and its rounds before the stall, on a loaded 2-core machine."""
PROXIED_AGGREGATIONS = ("store", "store_explicit")


def stall_deadline_s(faults: tuple[Any, ...], timeout_s: float) -> float | None:
    """The deadline of a launch with a stalling toxic: the failure bound of one attempt
    (3 T + 3 s, ``oracles.faults.failure_bound_s``) plus ``STALL_MARGIN_S``; None without."""
    if not any(f.toxic in STALLING_TOXICS for f in faults):
        return None
    return fault_oracle.failure_bound_s(timeout_s) + STALL_MARGIN_S


class ProxyFaultError(InvalidInput, ValueError):
    """A proxy fault no run can apply; the message names the field."""


def parse_at(at: str) -> tuple[str, int]:
    """``"start"`` → ("start", 0); ``"shard"`` → ("shard", 1); ``"ack#2"`` → ("ack", 2)."""
    phase, _, n = at.partition("#")
    if phase == "start" and not n:
        return phase, 0
    if phase not in ROUND_PHASES or (n and not (n.isdigit() and int(n) >= 1)):
        raise ProxyFaultError(
            f"proxy fault 'at': {at!r} is not 'start' or a round phase "
            f"({', '.join(ROUND_PHASES)}) with an optional '#n' (n >= 1)"
        )
    return phase, int(n or 1)


def triggers_for(faults: tuple[Any, ...]) -> tuple[PhaseTrigger, ...]:
    """Interposer triggers that apply the phase-timed faults on each rank's own proxy."""
    out = []
    for fault in faults:
        phase, n = parse_at(fault.at)
        if phase == "start":
            continue
        action = "cut" if fault.toxic == DOWN else "toxic"
        out.append(
            PhaseTrigger(
                rank=fault.rank,
                phase=phase,
                action=action,
                occurrence=n,
                toxic="" if action == "cut" else fault.toxic,
                attributes=dict(fault.attributes),
                stream=fault.stream,
                until=fault.until,
            )
        )
    return tuple(out)


@dataclass
class FaultedLaunch(LaunchFault):
    """One proxy-faulted launch, the driver of its link faults: its proxies (made by
    ``prepare``), its faults, their evidence and verdicts."""

    faults: tuple[Any, ...]
    proxies: StoreProxies | None = None
    world_size: int = 0
    session: ProxyFaultSession | None = field(default=None, repr=False)
    evidence: list[str] = field(default_factory=list)
    verdict: fault_oracle.FaultVerdict | None = None
    healing: healing_oracle.HealVerdict | None = None
    """The verdict on the next call after a healed fault (None: no fault of it heals)."""

    def deadline_ceiling_s(self, spec: WorkloadSpec) -> float | None:
        """A stalling toxic's short deadline (:func:`stall_deadline_s`), or None."""
        return stall_deadline_s(self.faults, spec.pipeline.aggregate_timeout_s)

    def prepare(self, spec: WorkloadSpec) -> WorkloadSpec:
        """The spec of a proxy-faulted launch: per-rank proxies, start toxics, triggers."""
        if spec.pipeline.aggregation not in PROXIED_AGGREGATIONS:
            raise ProxyFaultError(
                "proxy faults act on the link to the aggregation store: they need aggregation "
                f"'store' or 'store_explicit', not {spec.pipeline.aggregation!r}"
            )
        for i, fault in enumerate(self.faults):
            if not 0 <= fault.rank < self.world_size:
                raise ProxyFaultError(f"proxy_faults[{i}].rank {fault.rank} is not a rank")
        session = self.session
        assert session is not None, "a launch made by ProxyFaultSession.launch()"
        steady = any(f.heals and f.toxic == DOWN for f in self.faults)  # enabled again: see there
        self.proxies = proxies = StoreProxies(session.client, self.world_size, steady_ports=steady)
        session.launches.append(self)
        for fault in self.faults:
            if parse_at(fault.at)[0] != "start":
                continue
            if fault.toxic == DOWN:
                proxies.add_toxic(fault.rank, DOWN)
            else:
                proxies.add_toxic(
                    fault.rank, fault.toxic, stream=fault.stream, attributes=dict(fault.attributes)
                )
        return replace(
            spec,
            **proxies.spec_fields(),
            triggers=spec.triggers + triggers_for(self.faults),
        )

    def observe(self, run: Any) -> None:
        """Per faulted rank, when its link's toxics held data back (latency's delays): the
        network's share of its calls' time, which the timing oracles do not count; read
        before the proxies close."""
        held: dict[int, list[tuple[float, float]]] = {}
        for rank in sorted({f.rank for f in self.faults}):
            try:
                stats = self._proxies.stats(rank)
            except ProxyApiError:
                continue
            held[rank] = [span for t in stats.toxics.values() for span in t.held]
        run.held = held

    def judge(self, run: Any) -> list[Problem]:
        """Problems of a faulted launch: a fault that did not act, or a verdict's finding."""
        problems: list[Problem] = []
        for fault in self.faults:
            fired = self._fired(fault, run)
            if fired is None:
                text = f"proxy fault {fault} left no evidence"
                problems.append(
                    Problem(Area.FAULT, ProblemKind.NO_EVIDENCE, text, rank=fault.rank).in_phase(
                        run.index
                    )
                )
            else:
                self.evidence.append(fired)
        phase_faults = [parse_at(f.at) for f in self.faults]
        index = max(0, min(n for _, n in phase_faults) - 1) if phase_faults else 0
        self.verdict = fault_oracle.judge(
            run.records,
            run.result,
            index=index,
            canonical_replicas=run.spec.pipeline.canonical_replicas,
            timeout_s=run.spec.pipeline.aggregate_timeout_s,
            held=run.held,  # observed before the proxies closed
        )
        self.verdict.evidence[:0] = self.evidence
        problems += found_in(run.index, self.verdict)
        if any(f.heals for f in self.faults) and not (run.result and run.result.timed_out):
            problems += self._judge_healing(run)
        return problems

    def ends(self, run: Any) -> bool:
        """A failed launch was the link faults' doing, unless a rank fault of the launch
        was there too (judged as the crash it is)."""
        return not run.result.ok and not run.phase.rank_faults

    def close(self) -> None:
        if self.proxies is not None:
            self.proxies.close()

    @property
    def _proxies(self) -> StoreProxies:
        assert self.proxies is not None, "prepare() first"
        return self.proxies

    def _judge_healing(self, run: Any) -> list[Problem]:
        """The heal oracle's verdict, its evidence told with the faulted round's."""
        phase = run.phase
        self.healing = healing_oracle.judge(
            run.records,
            canonical_replicas=run.spec.pipeline.canonical_replicas,
            retry=phase.retry,
            late=bool(phase.rank_faults or phase.lags),
        )
        assert self.verdict is not None
        self.verdict.evidence += self.healing.evidence
        if not healing_oracle.heals_of(run.records):
            self.verdict.evidence.append(
                "no rank recorded a heal: the faulted call never returned on its rank (a fault "
                "that left no evidence is told above)"
            )
        return found_in(run.index, self.healing)

    def _fired(self, fault: Any, run: Any) -> str | None:
        phase, n = parse_at(fault.at)
        if phase != "start":
            for event in read_events(run.spec.out_dir, fault.rank):
                if event["kind"] == "fired" and event["phase"] == phase and event["n"] == n:
                    return f"rank {fault.rank}'s interposer applied {fault.toxic} at {fault.at}"
            return None
        try:
            stats = self._proxies.stats(fault.rank)
        except ProxyApiError:
            return None
        if fault.toxic == DOWN:
            return None if stats.enabled else f"rank {fault.rank}'s proxy was down"
        applied = sum(t.applied for t in stats.toxics.values())
        if applied == 0:
            return None
        return f"rank {fault.rank}'s link: {fault.toxic} applied to {applied} connection(s)"


class ProxyFaultSession:
    """One Toxiproxy server for a scenario's proxy-faulted launches; ``close`` stops it."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self.server: ToxiproxyServer = self._stack.enter_context(start_server())
        self.client = ToxiproxyClient(self.server.url, timeout_s=10.0)
        self._stack.callback(self.client.close)
        self.launches: list[FaultedLaunch] = []

    def launch(self, faults: tuple[Any, ...], world_size: int) -> FaultedLaunch:
        """The driver of one launch's link faults (its proxies are made by ``prepare``)."""
        return FaultedLaunch(faults, world_size=world_size, session=self)

    def close(self) -> None:
        for launch in self.launches:
            launch.close()
        self._stack.close()
