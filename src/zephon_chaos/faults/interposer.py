"""A thin KVStore between Zephon and its ``torch://`` client that fires on round phases.

Registered with Zephon as the ``chaos://`` scheme. It forwards every operation to the real
:class:`~zephon._internal.kvstore.TorchKVStore` and classifies each *write* by the key's
place in Zephon's round protocol (``zephon/_internal/coordination.py``, ``KVCoordinator``):

============  ==================================  ===================================
phase         key written                          by
============  ==================================  ===================================
announce      ``{ns}/round`` (set)                 the leader, opening a round
shard         ``{ns}/{round}/state/{who}`` (set)   every participant, its state shard
participants  ``{ns}/{round}/participants`` (add)  every participant, after its shard
outcome       ``{ns}/{round}/outcome`` (set once)  the leader: merged result or failure
ack           ``{ns}/{round}/ack/{who}`` (set)     each follower, after decoding
============  ==================================  ===================================

Chunk keys of large values and deletes are not phases. Each phase write is logged to the
rank's event file (``<out_dir>/interposer/rank<r>.jsonl``, flushed; fsynced before any
destructive action, so a SIGKILL cannot lose the evidence). A trigger (``PhaseTrigger``)
matching the n-th write of a phase applies its action before or after the write reaches the
store; the harness hears of it on the control channel (``faults.control``).

A proxy action with ``until`` ``round_end`` is undone by the rank itself (:class:`LinkHeals`):
the workload calls ``plan.heals.heal()`` once the ``checkpoint()`` call it fired in has
returned or raised, a logical point of the rank's own, and the link is whole again for the
next call (``oracles.healing`` holds Zephon to completing that one). Whether any of the rank's
store operations raised between the fault and its heal goes with it (``failure_seen``): only
a failed operation makes Zephon's client drop the connection the fault ended.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from zephon_chaos.errors import InvalidInput
from zephon_chaos.workload.spec import LINK_HEALS, NEVER, ROUND_PHASES, PhaseTrigger

SCHEME = "chaos"
ACTIONS: dict[str, str] = {
    "event": "record the event only (an observer)",
    "hold": "block the caller until the harness releases it (or the hold times out)",
    "await": "as hold, while the harness acts elsewhere (the hosted store); no stall of the rank",
    "drop": "do not forward the write, and report it done (a lost write: a lost ack)",
    "cut": "disable this rank's own store proxy through the Toxiproxy API",
    "toxic": "add a toxic to this rank's own store proxy through the Toxiproxy API",
    "raise": "raise in the store call, as a failing client would",
    "sigkill": "SIGKILL this rank",
    "sigterm": "SIGTERM this rank",
    "sigstop": "SIGSTOP this rank (the harness sends SIGCONT)",
    "exit": "exit this rank at once (status 17)",
    "kill_agent": "SIGKILL this rank's torchrun agent",
}
PROXY_ACTIONS = ("cut", "toxic")
WHEN = ("before", "after")


class InterposerError(InvalidInput, ValueError):
    """A trigger or plan that cannot work; the message names the field and the way out."""


def phase_of(op: str, key: str) -> str | None:
    """The round phase a write of ``key`` by ``op`` belongs to, or None."""
    if not key.startswith("zephon/") or "/chunk/" in key:
        return None
    if op == "set" and key.endswith("/round"):
        return "announce"
    if op == "set" and "/state/" in key:
        return "shard"
    if op == "append" and key.endswith("/participants"):
        return "participants"
    if op == "set_if_absent" and key.endswith("/outcome"):
        return "outcome"
    if op == "set" and "/ack/" in key:
        return "ack"
    return None


def events_path(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / "interposer" / f"rank{rank}.jsonl"


def read_events(out_dir: str | Path, rank: int) -> list[dict[str, Any]]:
    """A rank's interposer events; a torn last line (a kill mid-write) is skipped."""
    path = events_path(out_dir, rank)
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def validate(trigger: PhaseTrigger, where: str = "trigger") -> None:
    """Raise InterposerError naming the field of a trigger no run could apply."""
    if trigger.phase not in ROUND_PHASES:
        raise InterposerError(f"{where}.phase: {trigger.phase!r} is not one of {ROUND_PHASES}")
    if trigger.action not in ACTIONS:
        raise InterposerError(f"{where}.action: {trigger.action!r} is not one of {list(ACTIONS)}")
    if trigger.when not in WHEN:
        raise InterposerError(f"{where}.when: {trigger.when!r} is not before or after")
    if trigger.occurrence < 1:
        raise InterposerError(f"{where}.occurrence: counts from 1, got {trigger.occurrence}")
    if trigger.action == "drop" and trigger.when != "before":
        raise InterposerError(f"{where}.when: a write can only be dropped before it is made")
    if trigger.action == "toxic" and not trigger.toxic:
        raise InterposerError(f"{where}.toxic: action 'toxic' needs a toxic type (latency, ...)")
    if trigger.until not in LINK_HEALS:
        raise InterposerError(f"{where}.until: {trigger.until!r} is not one of {LINK_HEALS}")
    if trigger.until != NEVER and trigger.action not in PROXY_ACTIONS:
        raise InterposerError(
            f"{where}.until: only a link action ({', '.join(PROXY_ACTIONS)}) can be undone; "
            f"action {trigger.action!r} takes until {NEVER!r}"
        )


@dataclass(frozen=True)
class Heal:
    """A link action to undo: the trigger that applied it, and what it applied."""

    trigger: PhaseTrigger
    facts: dict[str, Any]
    """The fired event's facts (``phase``, ``n``, ``key``, ``proxy``: the toxic's name)."""
    failure_seen: bool = False
    """Some store operation of the rank raised since the action: Zephon's client dropped its
    connection then (``TorchKVStore._call``) and reconnects at its next operation. Without
    one (a write that awaits no reply returns over a gone link: c10d's SET) the client still
    holds the connection the action ended, and its next operation fails on it."""


class LinkHeals:
    """The link actions a rank's interposer applied that end with the faulted round.

    Filled by the interposer when such a trigger fires, emptied by :meth:`heal` once the
    ``checkpoint()`` call it fired in has returned or raised (the workload calls it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: list[Heal] = []
        self._log: EventLog | None = None

    def add(self, heal: Heal, log: EventLog) -> None:
        """``heal`` is due; :meth:`heal` logs it where its firing was logged."""
        with self._lock:
            self._due.append(heal)
            self._log = log

    def saw_failure(self) -> None:
        """A store operation of the rank raised: every due heal's client has seen its link."""
        with self._lock:
            self._due = [dataclasses.replace(h, failure_seen=True) for h in self._due]

    @property
    def due(self) -> tuple[Heal, ...]:
        """The actions to undo at the end of the current call."""
        with self._lock:
            return tuple(self._due)

    def heal(self, plan: InterposerPlan) -> list[dict[str, Any]]:
        """Undo every due action on ``plan``'s proxy (enable it, remove the toxic); the facts
        of each, as logged (kind ``healed``), with ``failure_seen``."""
        with self._lock:
            due, self._due, log = self._due, [], self._log
        if not due:
            return []
        from zephon_chaos.faults.proxy.client import ToxiproxyClient

        assert plan.proxy_api_url and plan.proxy_name
        done = []
        with ToxiproxyClient(plan.proxy_api_url, timeout_s=10.0) as client:
            for heal in due:
                if heal.trigger.action == "cut":
                    client.enable(plan.proxy_name)
                else:
                    client.remove_toxic(plan.proxy_name, heal.facts["proxy"]["toxic"])
                facts = {k: heal.facts[k] for k in ("rank", "phase", "n")}
                facts["action"] = heal.trigger.action
                facts["until"] = heal.trigger.until
                facts["failure_seen"] = heal.failure_seen
                if log is not None:
                    log.write("healed", sync=True, **facts)
                done.append(facts)
        return done


@dataclass
class InterposerPlan:
    """What one rank's interposer does: its triggers, where it logs, whom it tells."""

    rank: int
    triggers: tuple[PhaseTrigger, ...] = ()
    events_file: Path | None = None
    control: str | None = None
    proxy_api_url: str | None = None
    proxy_name: str | None = None
    heals: LinkHeals = field(default_factory=LinkHeals, compare=False, repr=False)
    """Its link actions that end with their round (``until``), due to be undone."""

    def __post_init__(self) -> None:
        for i, trigger in enumerate(self.triggers):
            validate(trigger, f"triggers[{i}]")
            if trigger.action in PROXY_ACTIONS and not (self.proxy_api_url and self.proxy_name):
                raise InterposerError(
                    f"triggers[{i}].action: {trigger.action!r} acts on rank {self.rank}'s own "
                    "store proxy, and this rank has none; place the store proxies first "
                    "(the store_proxy fixture sets store_proxy_ports and proxy_api_url)"
                )


class EventLog:
    """Append-only JSON lines; ``sync`` makes them survive a SIGKILL of the writer."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._f = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, kind: str, *, sync: bool = False, **fields: Any) -> dict[str, Any]:
        event = {"kind": kind, "t": time.monotonic(), "pid": os.getpid(), **fields}
        if self._f is not None:
            self._f.write(json.dumps(event) + "\n")
            self._f.flush()
            if sync:
                os.fsync(self._f.fileno())
        return event

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class _Fired(Exception):
    """Internal: the action replaced the write (``drop``)."""


class PhaseWrites:
    """One rank's round-phase writes: counted, logged and faulted as its plan says.

    The part of the interposer that knows nothing of the medium: the store interposer below
    and the ``aggregate_dir`` one (``faults.dir_interposer``) classify a write, then hand it
    here with the call that makes it, so both log the same events and act the same way.
    """

    def __init__(self, plan: InterposerPlan) -> None:
        self.plan = plan
        self.log = EventLog(plan.events_file)
        self.counts: dict[str, int] = {}

    def close(self) -> None:
        self.log.close()

    def write(
        self, phase: str, key: str, forward: Callable[[], Any], dropped: Any, **extra: Any
    ) -> Any:
        """Log the n-th write of ``phase``, apply the triggers due before it, make it with
        ``forward`` (or return ``dropped`` when a trigger dropped it), then those due after."""
        n = self.counts[phase] = self.counts.get(phase, 0) + 1
        facts: dict[str, Any] = {"rank": self.plan.rank, "phase": phase, "n": n, "key": key}
        facts.update(extra)
        self.log.write("write", **facts)
        due = [t for t in self.plan.triggers if t.phase == phase and t.occurrence == n]
        try:
            for trigger in (t for t in due if t.when == "before"):
                self._apply(trigger, facts)
        except _Fired:
            return dropped
        result = forward()
        for trigger in (t for t in due if t.when == "after"):
            self._apply(trigger, facts)
        return result

    def _apply(self, trigger: PhaseTrigger, facts: dict[str, Any]) -> None:
        action = trigger.action
        fired = {**facts, "action": action, "when": trigger.when}
        if action in ("sigkill", "sigterm", "sigstop", "exit", "kill_agent"):
            self._tell("fired", fired, sync=True)
            _signal_action(action)
            self.log.write("resumed", **fired)
            return
        if action in ("hold", "await"):
            self.log.write("held", sync=True, **fired)
            how = "unreachable"
            if self.plan.control is not None:
                from zephon_chaos.faults.control import notify

                how = notify(
                    self.plan.control,
                    {"kind": "held", **fired},
                    wait_s=trigger.hold_timeout_s,
                )
            self.log.write("released", how=how, **fired)
            return
        if action in PROXY_ACTIONS:
            fired["proxy"] = self._proxy_action(trigger)
            self._tell("fired", fired, sync=True)
            if trigger.until != NEVER:
                self.plan.heals.add(Heal(trigger, fired), self.log)
            return
        self._tell("fired", fired, sync=action != "event")
        if action == "drop":
            raise _Fired
        if action == "raise":
            raise RuntimeError(
                f"interposer: rank {self.plan.rank} fails its {facts['phase']} write "
                f"#{facts['n']} ({facts['key']}) as scheduled"
            )

    def _tell(self, kind: str, fired: dict[str, Any], *, sync: bool) -> None:
        event = self.log.write(kind, sync=sync, **fired)
        if self.plan.control is not None:
            from zephon_chaos.faults.control import notify

            notify(self.plan.control, event)

    def _proxy_action(self, trigger: PhaseTrigger) -> dict[str, Any]:
        from zephon_chaos.faults.proxy.client import ToxiproxyClient

        assert self.plan.proxy_api_url and self.plan.proxy_name
        with ToxiproxyClient(self.plan.proxy_api_url, timeout_s=10.0) as client:
            if trigger.action == "cut":
                info = client.disable(self.plan.proxy_name)
                return {"name": info.name, "enabled": info.enabled}
            toxic = client.add_toxic(
                self.plan.proxy_name,
                trigger.toxic,
                stream=trigger.stream,
                name=f"interposer-{trigger.phase}-{trigger.occurrence}",
                attributes=dict(trigger.attributes),
            )
            return {"name": self.plan.proxy_name, "toxic": toxic.name, "type": toxic.type}


_PLANS: dict[str, InterposerPlan] = {}
_PLAN_IDS = itertools.count()
_LOCK = threading.Lock()
"""Rank threads (the in-process tier) register the scheme and their plans concurrently."""


def _factory(uri: str, timeout_s: float) -> Any:
    from zephon._internal.kvstore import open_kv_store

    parsed = urlparse(uri)
    key = (parse_qs(parsed.query).get("plan") or [""])[0]
    plan = _PLANS.get(key)
    if plan is None:
        raise InterposerError(
            f"{uri!r} names no interposer plan of this process; the chaos:// store is built "
            "where interpose_uri() ran: the rank's own process (any runner), not the MTP "
            "child mtp_mode spawns; drop mtp_mode"
        )
    inner = open_kv_store(f"torch://{parsed.netloc}", timeout_s=timeout_s)
    return InterposedStore(inner, plan)


def ensure_registered() -> None:
    """Register the ``chaos://`` scheme with Zephon once per process."""
    from zephon._internal import kvstore

    with _LOCK:
        if SCHEME not in kvstore._REGISTRY:
            kvstore.register_kv_store(SCHEME, _factory)


def interpose_uri(store_uri: str, plan: InterposerPlan) -> str:
    """The ``chaos://`` URI that wraps ``store_uri`` (a ``torch://`` URI) with ``plan``."""
    scheme, sep, netloc = store_uri.partition("://")
    if scheme.lower() != "torch" or not sep:
        raise InterposerError(
            f"the interposer wraps torch:// stores, not {store_uri!r}; phase triggers need "
            "aggregation 'store' or 'store_explicit' (aggregate_dir has no store to observe)"
        )
    ensure_registered()
    key = f"r{plan.rank}-{next(_PLAN_IDS)}-{os.getpid()}"
    with _LOCK:
        _PLANS[key] = plan
    return f"{SCHEME}://{netloc.rstrip('/')}?plan={key}"


def _kvstore_base() -> type:
    from zephon._internal.kvstore import KVStore

    return KVStore


def _make_store_class() -> type:
    base = _kvstore_base()

    class _InterposedStore(base):  # type: ignore[misc, valid-type]
        """Forwards to the real client; classifies writes; applies the plan's triggers."""

        def __init__(self, inner: Any, plan: InterposerPlan) -> None:
            self.inner = inner
            self.plan = plan
            self.writes = PhaseWrites(plan)
            self.poll_interval_s = inner.poll_interval_s
            self.max_value_bytes = inner.max_value_bytes

        def __del__(self) -> None:
            self.writes.close()

        def _inner(self, call: Callable[[], Any]) -> Any:
            """Make one operation of the real client; one that raises is a failure the rank's
            client has seen (it drops its connection: ``LinkHeals.saw_failure``)."""
            try:
                return call()
            except Exception:
                self.plan.heals.saw_failure()
                raise

        # Reads and plain operations pass through.
        def check_ready(self) -> None:
            self._inner(self.inner.check_ready)

        def get(self, key: str) -> bytes | None:
            return self._inner(lambda: self.inner.get(key))  # type: ignore[no-any-return]

        def get_many(self, keys: list[str]) -> list[bytes | None]:
            return self._inner(lambda: self.inner.get_many(keys))  # type: ignore[no-any-return]

        def exists(self, key: str) -> bool:
            return bool(self._inner(lambda: self.inner.exists(key)))

        def delete(self, key: str) -> None:
            self._inner(lambda: self.inner.delete(key))

        def wait(self, keys: list[str], timeout: float) -> bool:
            return bool(self._inner(lambda: self.inner.wait(keys, timeout)))

        # Writes are where phases happen.
        def set(self, key: str, value: bytes) -> None:
            self._write("set", key, value, lambda: self.inner.set(key, value), None)

        def set_if_absent(self, key: str, value: bytes) -> bytes:
            result = self._write(
                "set_if_absent", key, value, lambda: self.inner.set_if_absent(key, value), value
            )
            return result  # type: ignore[no-any-return]

        def append(self, key: str, value: bytes) -> None:
            self._write("append", key, value, lambda: self.inner.append(key, value), None)

        def _set(self, key: str, value: bytes) -> None:
            self.set(key, value)

        def _set_if_absent(self, key: str, value: bytes) -> bytes:
            return self.set_if_absent(key, value)

        def _append(self, key: str, value: bytes) -> None:
            self.append(key, value)

        def _write(
            self, op: str, key: str, value: bytes, forward: Callable[[], Any], dropped: Any
        ) -> Any:
            phase = phase_of(op, key)
            if phase is None:
                return self._inner(forward)
            extra: dict[str, str] = {}
            if phase == "outcome":
                extra["outcome"] = "result" if value[:1] == b"R" else "failure"
            return self.writes.write(phase, key, lambda: self._inner(forward), dropped, **extra)

    return _InterposedStore


def _signal_action(action: str) -> None:
    from zephon_chaos.workload.self_faults import signal_self

    signal_self(action)


_STORE_CLASS: type | None = None


def InterposedStore(inner: Any, plan: InterposerPlan) -> Any:
    """An interposer around ``inner`` (built lazily: zephon is imported only where used)."""
    global _STORE_CLASS
    if _STORE_CLASS is None:
        _STORE_CLASS = _make_store_class()
    return _STORE_CLASS(inner, plan)


def plan_for(spec: Any, rank: int) -> InterposerPlan | None:
    """This rank's plan from a workload spec, or None when it interposes nothing."""
    triggers = tuple(t for t in spec.triggers if t.rank == rank)
    if not (spec.interpose or triggers):
        return None
    return InterposerPlan(
        rank=rank,
        triggers=triggers,
        events_file=events_path(spec.out_dir, rank),
        control=spec.control,
        proxy_api_url=spec.proxy_api_url,
        proxy_name=spec.store_proxy_names.get(str(rank)),
    )
