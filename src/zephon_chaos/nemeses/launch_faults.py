"""The drivers of one launch's faults (``nemeses.nemesis``), made from its phase: the one place
that knows which kinds of fault the harness drives, so that the runner knows none of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zephon_chaos.nemeses.hosted_store import StoreFaultLaunch
from zephon_chaos.nemeses.nemesis import LaunchFault
from zephon_chaos.nemeses.round_faults import RoundFaultLaunch
from zephon_chaos.nemeses.scenario_proxy import ProxyFaultSession
from zephon_chaos.scenario import Launch
from zephon_chaos.workload.spec import WorkloadSpec


def launch_faults(
    phase: Launch,
    spec: WorkloadSpec,
    store_host: Any,
    proxy_session: Callable[[], ProxyFaultSession],
) -> tuple[LaunchFault, ...]:
    """The launch's drivers, in the order they prepare its spec and judge it: the hosted
    store's fault (``store_host``: the store process it acts on), the link faults (through
    the scenario's Toxiproxy session, opened on first use), a round-point rank fault. A
    step-timed rank fault needs no driver: the rank fires it itself, and the launch's fate
    judges it as a crash."""
    timeout_s = spec.pipeline.aggregate_timeout_s
    drivers: list[LaunchFault] = []
    if phase.store_faults:
        drivers.append(StoreFaultLaunch(phase.store_faults[0], store_host, timeout_s))
    if phase.proxy_faults:
        drivers.append(proxy_session().launch(phase.proxy_faults, phase.world_size))
    at_round = next((f for f in phase.rank_faults if f.at_round), None)
    if at_round is not None:
        drivers.append(RoundFaultLaunch(at_round, timeout_s, phase.world_size))
    return tuple(drivers)
