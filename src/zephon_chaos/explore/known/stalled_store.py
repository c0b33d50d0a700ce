"""``stalled-store-blocks-store-calls`` and ``stalled-store-link``: one root cause (a store
call's timeout does not bound a reply that never comes), seen from a stopped store process
and from a link that delivers nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from zephon_chaos.diagnostics.frames import ThreadStack
from zephon_chaos.explore.known.defect import KnownDefect, over_bound, run_of
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.runner.hangs import HangSignature, LaunchContext

STORE_CALL = ("_call", "_internal/kvstore.py")
"""Where a TorchKVStore call waits for its reply: ``TorchKVStore._call`` (function, file)."""


def _stalled_hosted_store(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A faulted round's call over its bound in a launch whose hosted store was stopped, and
    no longer than the stall plus that bound: the stall is what held it."""
    from zephon_chaos.nemeses.hosted_store import StoreFaultLaunch
    from zephon_chaos.oracles.faults import failure_bound_s

    run = run_of(outcome, problem) if over_bound(problem) else None
    fault = None if run is None else run.fault
    if not isinstance(fault, StoreFaultLaunch) or fault.fault.action != "sigstop":
        return False
    stalled, timeout_s = fault.stalled_s(), fault.timeout_s
    measured = list(fault.verdict.durations.values()) if fault.verdict else []
    bounds = [failure_bound_s(timeout_s)] * len(measured)
    for p in run.liveness.problems if run.liveness else []:
        measured.append(p.measured_s)
        bounds.append(p.bound_s)
    return stalled > 0 and all(s <= stalled + b for s, b in zip(measured, bounds, strict=True))


STALLED_HOSTED_STORE = KnownDefect(
    id="stalled-store-blocks-store-calls",
    summary=(
        "a store that stops answering (its process stopped, or a link that delivers nothing) "
        "keeps TorchKVStore calls blocked until it answers again, past any multiple of "
        "aggregate_timeout_s, so a round stalled at the store fails only after the stall"
    ),
    evidence=(
        "zephon 0.2.0 _internal/kvstore.py: KVStoreFactory documents that the timeout 'bounds "
        "the store's blocking operations, including connection setup', and TorchKVStore "
        "hands each call to c10d's TCPStore client, whose timeout does not bound a reply that "
        "never comes (a connect to a stopped server also succeeds: the kernel completes it). "
        "Standalone: tests/zephon/repro/stalled_store_process.py (T = 1 s, server SIGSTOPped "
        "8 s: get returns after 8.0 s, a fresh client's wait after 9.0 s, both only at the "
        "SIGCONT). Same root cause as the stalled-link finding (Toxiproxy timeout toxic, "
        "docs/faults.md Findings 1). Minimal scenario: G 2 -> 2, C=2, store_explicit, T = 2 s, "
        "the hosted store stopped 12 s at shard#1: both ranks fail after 12.1 s (bound 9 s)"
    ),
    explains=_stalled_hosted_store,
)


def _stalling(faults: Iterable[Any]) -> list[Any]:
    """The link faults that stall a link for good (``STALLING_TOXICS``)."""
    from zephon_chaos.scenario_rules import STALLING_TOXICS

    return [f for f in faults if f.toxic in STALLING_TOXICS]


def _stalled_link(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A hang, or a wait over its bound, in a launch whose store link a ``timeout`` toxic
    stalled (the fault's evidence says it acted): the stall is what held it."""
    from zephon_chaos.nemeses.scenario_proxy import FaultedLaunch

    stalled = over_bound(problem) or problem.is_(Area.FAULT, ProblemKind.HANG)
    run = run_of(outcome, problem) if stalled else None
    fault = None if run is None else run.fault
    if not isinstance(fault, FaultedLaunch) or not fault.evidence:
        return False
    return bool(_stalling(fault.faults))


def _stall_installed(context: LaunchContext) -> bool:
    """The trigger: a stalling toxic of the launch is on its link, from the start or put
    there by its rank's interposer at its round point (the interposer's event says so)."""
    from zephon_chaos.faults.interposer import read_events
    from zephon_chaos.nemeses.scenario_proxy import FaultedLaunch, parse_at

    fault = context.fault
    if not isinstance(fault, FaultedLaunch):
        return False
    for stall in _stalling(fault.faults):
        phase, n = parse_at(stall.at)
        if phase == "start" or any(
            e.get("kind") == "fired" and e.get("phase") == phase and e.get("n") == n
            for e in read_events(context.out_dir, stall.rank)
        ):
            return True
    return False


def _in_store_call(thread: ThreadStack) -> bool:
    """A thread waiting for a store's reply inside a TorchKVStore call."""
    func, file = STORE_CALL
    return any(f.func.split(".")[-1] == func and f.file.endswith(file) for f in thread.frames)


STALLED_LINK_HANG = HangSignature(triggered=_stall_installed, stuck=_in_store_call)
"""The hang as the launch runs: a stalling toxic acted, and a rank waits in a store call."""


STALLED_STORE_LINK = KnownDefect(
    id="stalled-store-link",
    summary=(
        "a store link that stalls (an established connection that delivers nothing: the "
        "Toxiproxy timeout toxic) keeps TorchKVStore calls on it blocked past any multiple of "
        "aggregate_timeout_s, so ranks that wait for the stalled rank (a lockstep retry's "
        "agreement) hang to the launch deadline, and its round fails past the bound"
    ),
    evidence=(
        "zephon 0.2.0 _internal/kvstore.py: KVStoreFactory documents that the timeout bounds "
        "the store's blocking operations; TorchKVStore.wait/check/get/add/compare_set/delete "
        "hand each call to c10d's TCPStore client, whose timeout does not bound a reply that "
        "never comes. Measured still blocked after 8 s at T = 1-2 s "
        "(tests/zephon/test_faults_store.py::"
        "test_a_stalled_store_link_fails_a_store_call_within_the_bound, strict xfail); the "
        "standalone tests/zephon/repro/stalled_store_process.py shows the same root cause with "
        "the server stopped instead of the link. Generated launches with a timeout toxic run "
        "under a deadline of 3 T + 3 s + 30 s (nemeses.scenario_proxy.stall_deadline_s)"
    ),
    explains=_stalled_link,
    hang=STALLED_LINK_HANG,
)
