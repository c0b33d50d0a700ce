"""A launcher (``LaunchSpec -> GroupResult``) whose ranks are threads of this interpreter.

It reads the same workload spec file torchrun's ranks read and runs
:func:`zephon_chaos.rank.main.run_rank` once per rank in a thread, so records,
checkpoints and plants are byte-for-byte the workload's. Aggregation ``store`` gets a
TCPStore hosted for the launch (as torchrun's agent hosts one per launch), named
explicitly because threads share ``os.environ``.

Crashes: a ``raise`` fault ends its rank; the other ranks stop at the fault's step (once
they took every checkpoint the crashed rank took) or before the first checkpoint it never
takes, whichever comes first: where torchrun would have torn the group down. Any other
failure stops the remaining ranks at their next step and closes the launch's store, so a
rank waiting in a checkpoint is released at once instead of at its aggregation timeout.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from zephon_chaos.closing import Closing
from zephon_chaos.inproc.rank_group import (
    RANK_THREADS,
    GroupStopped,
    GroupTornDown,
    RankGroup,
    WarningRouter,
)
from zephon_chaos.inproc.refusal import TierRefusal, collective_refusal
from zephon_chaos.inproc.stores import StorePool
from zephon_chaos.lanes import lanes_of
from zephon_chaos.launch.launch_spec import LaunchSpec
from zephon_chaos.launch.result import GroupResult, RankOutcome
from zephon_chaos.rank.main import run_rank
from zephon_chaos.scenario import checkpoints_before_faults
from zephon_chaos.workload.spec import COLLECTIVE_FORMATS, WorkloadSpec

WORKLOAD_MODULE = "zephon_chaos.rank"
STOPPED_EXITCODE = -15
"""What a rank stopped with its group reports: torchrun ends the survivors with SIGTERM."""


class InprocLauncher(Closing):
    """Call it with a workload :class:`LaunchSpec`; it returns the group's result.

    ``close()`` (or ``with``) closes the stores it hosted; until then some stay open for the
    late clean-up of collected pipelines (see :mod:`zephon_chaos.inproc.stores`).
    """

    def __init__(
        self,
        pool: StorePool | None = None,
        join_grace_s: float = 10.0,
        tmpdir: Path | None = None,
    ) -> None:
        self.pool = pool or StorePool()
        self.join_grace_s = join_grace_s
        self.tmpdir = tmpdir
        """The temp folder Zephon sees during launches (a torchrun group gets its own TMPDIR)."""
        self.launches = 0

    def close(self) -> None:
        self.pool.close()

    def __call__(self, spec: LaunchSpec) -> GroupResult:
        self._refuse(spec)
        if self.tmpdir is None:
            return self._launch(spec)
        self.tmpdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        saved = tempfile.tempdir
        tempfile.tempdir = str(self.tmpdir)
        try:
            return self._launch(spec)
        finally:
            tempfile.tempdir = saved

    def _launch(self, spec: LaunchSpec) -> GroupResult:
        spec_file = Path(spec.args[0])
        wspec = WorkloadSpec.read(spec_file)
        if wspec.persist_format in COLLECTIVE_FORMATS:
            raise TierRefusal(collective_refusal("spec.persist_format", wspec.persist_format))
        world = spec.world_size
        self.launches += 1
        started = time.monotonic()
        host = self.pool.open() if wspec.pipeline.aggregation == "store" else None
        default_store = f"torch://{host.endpoint}" if host is not None else "torch://"
        stores = _rank_stores(wspec, world, default_store)
        group = RankGroup(
            world=world,
            stop_from_checkpoint=checkpoints_before_faults(
                wspec.checkpoints,
                wspec.faults,
                world,
                wspec.pipeline.canonical_replicas,
                wspec.pipeline.mapping,
                wspec.tp,
            ),
            faulted={f.rank for f in wspec.faults},
            lockstep=wspec.sync == "lockstep",
        )
        if wspec.faults:
            first = min(f.at_step for f in wspec.faults)
            c, mapping, tp = wspec.pipeline.canonical_replicas, wspec.pipeline.mapping, wspec.tp
            for r in range(world):
                if r not in group.faulted and world // tp <= c:
                    per = max(1, len(lanes_of(r, world, c, mapping, tp)))
                    group.stop_at_batch[r] = first * per
        router = WarningRouter()
        children_before = _children()
        errors: dict[int, BaseException] = {}
        tracebacks: dict[int, str] = {}
        finished_at: dict[int, float] = {}

        def body(rank: int) -> None:
            with RANK_THREADS.running():
                rank_body(rank)

        def rank_body(rank: int) -> None:
            try:
                try:
                    run_rank(
                        wspec,
                        rank,
                        world,
                        default_store=stores[rank],
                        hooks=group.hooks(rank, router),
                    )
                except BaseException as exc:
                    group.ended.add(rank)
                    group.left(rank, exc)
                    if group.torn_down_at is not None and not isinstance(
                        exc, (GroupStopped, GroupTornDown)
                    ):
                        exc = GroupStopped(
                            f"rank {rank} stopped with its group ({group.stop_reason}); the "
                            f"teardown ended its wait: {type(exc).__name__}: {exc}"
                        )
                    errors[rank] = exc
                    tracebacks[rank] = traceback.format_exc()
                    if not isinstance(exc, (GroupStopped, GroupTornDown)) and not _scheduled(exc):
                        group.fail(f"rank {rank} failed: {type(exc).__name__}: {exc}")
            except GroupTornDown as exc:  # it arrived while the rank was ending on its own
                errors.setdefault(rank, exc)
            finally:
                group.ended.add(rank)
                finished_at[rank] = time.monotonic()

        threads = [
            threading.Thread(target=body, args=(r,), name=f"zc-{spec.name}-rank{r}", daemon=True)
            for r in range(world)
        ]
        timed_out = False
        stacks: dict[str, str] = {}
        landed: list[str] = []
        try:
            with warnings.catch_warnings(), teardowns_in_finalizers(landed):
                warnings.simplefilter("always")
                warnings.showwarning = router.show  # type: ignore[assignment]
                for t in threads:
                    t.start()
                try:
                    timed_out = self._join(
                        threads, group, host, started + spec.deadline_s, lambda: _cut_links(wspec)
                    )
                except KeyboardInterrupt:
                    self._end_interrupted(threads, group, host, wspec, children_before)
                    raise
                if timed_out:
                    stacks = _stacks(threads)
                    group.torn_down_at = group.torn_down_at or time.monotonic()
                    group.fail(f"the launch passed its {spec.deadline_s:.0f}s deadline")
                    if host is not None:
                        self.pool.hang_up(host)
                        host = None
                    _kill_new_children(children_before)
                    for t in threads:
                        t.join(self.join_grace_s)
        finally:
            if host is not None:
                self.pool.retire(host)
            if any(t.is_alive() for t in threads):
                group.fail("the launch was interrupted")
        result = _result(
            spec, spec_file, world, errors, tracebacks, finished_at, timed_out, stacks, started
        )
        result.torn_down_at = group.torn_down_at
        result.notes.extend(landed)
        return result

    def _end_interrupted(
        self,
        threads: list[threading.Thread],
        group: RankGroup,
        host: Any,
        wspec: WorkloadSpec,
        children_before: set[int],
    ) -> None:
        """Ctrl-C or SIGTERM arrived while ranks ran: end them as a failed group ends, and
        wait for them (within the grace), so that none still writes into folders the caller
        removes next. Left running, a rank's checkpoint files raced the explorer's removal of
        its working folder, which then stayed behind."""
        group.fail("the launch was interrupted")
        with contextlib.suppress(KeyboardInterrupt):  # a second one: the first still propagates
            self._join(
                threads,
                group,
                host,
                time.monotonic() + self.join_grace_s,
                lambda: _cut_links(wspec),
            )
            _kill_new_children(children_before)

    def _join(
        self,
        threads: list[threading.Thread],
        group: RankGroup,
        host: Any,
        deadline: float,
        cut_links: Any = None,
    ) -> bool:
        """Wait for every thread until ``deadline``; True if it passed. ``cut_links``: what
        ends the rank threads' store links (their proxies) when the group fails."""
        released = False
        for t in threads:
            while t.is_alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return True
                t.join(min(remaining, 0.5))
                if group.failed.is_set():
                    # A real group is torn down at its first failure: free waiting ranks now,
                    # whatever they wait on (the launch's store, a shared one, a directory).
                    if group.torn_down_at is None:
                        group.torn_down_at = time.monotonic()
                        if cut_links is not None:
                            cut_links()
                    if not released and host is not None:
                        self.pool.hang_up(host)
                        released = True
                    if host is None:  # a launch-owned store is released above instead
                        _tear_down(threads, group)
        return False

    @staticmethod
    def _refuse(spec: LaunchSpec) -> None:
        if not spec.module or str(spec.entry) != WORKLOAD_MODULE or len(spec.args) != 1:
            raise TierRefusal(
                f"the in-process tier runs only the workload ({WORKLOAD_MODULE} SPEC.json), "
                f"not {spec.entry!s}; launch other programs with torchrun"
            )
        if spec.path != "standalone" or spec.nnodes != 1:
            raise TierRefusal(
                f"launch path {spec.path!r} with {spec.nnodes} node(s) needs torchrun; "
                "the in-process tier has one node of threads"
            )


def _cut_links(wspec: WorkloadSpec) -> None:
    """Close every connection of every rank's store proxy, as torchrun's SIGTERM closes a
    process's sockets: a call blocked in the C++ store client on one returns.

    Toxiproxy closes a proxy's connections only by disabling it, which closes its listener
    too; so each proxy that was serving serves again at once (its toxics as they were). Left
    disabled, it refuses the torn-down rank's reconnects, which c10d retries until the rank's
    timeout T: Zephon's clean-up makes a new client per store call (the leader deletes each
    acknowledgement it read), so a leader torn down in its acknowledgement wait spent T or
    more per acknowledgement on a link no fault had touched, over its failure bound. A proxy
    its fault disabled (``down``) stays down."""
    if not wspec.store_proxy_names or not wspec.proxy_api_url:
        return
    from zephon_chaos.faults.proxy.client import ProxyApiError, ToxiproxyClient

    with (
        contextlib.suppress(ProxyApiError, OSError),
        ToxiproxyClient(wspec.proxy_api_url, timeout_s=5.0) as client,
    ):
        proxies = client.proxies()
        for name in wspec.store_proxy_names.values():
            proxy = proxies.get(name)
            if proxy is None or not proxy.enabled:
                continue
            with contextlib.suppress(ProxyApiError):  # a port taken meanwhile: it stays down
                client.disable(name)
                client.enable(name)


def _rank_stores(wspec: WorkloadSpec, world: int, default_store: str) -> list[str]:
    """Each rank thread's ``torch://`` store: through its own proxy when the spec places one
    (link faults), pointed at the launch's store as a rank process points it at torchrun's
    (``faults.placement``); else the launch's store."""
    if not wspec.store_proxy_ports:
        return [default_store] * world
    from zephon_chaos.faults.placement import place_store_proxy

    address, _, port = default_store.partition("://")[2].rpartition(":")
    env = {"MASTER_ADDR": address, "MASTER_PORT": port}
    out = []
    for rank in range(world):
        placement = place_store_proxy(wspec, rank, env)
        out.append(placement.store_uri if placement is not None else default_store)
    return out


ZEPHON_POLLS = (
    ("zephon/_internal/coordination.py", "_wait_until"),
    ("zephon/_internal/coordination.py", "_wait_value"),
    ("zephon/_internal/coordination.py", "_wait_for_announcement"),
    ("zephon/_internal/kvstore.py", "wait"),
)
"""Zephon's poll loops (file, function), each sleeping between its looks (zephon 0.2.0:
``_wait_until``, ``_wait_value``, the announcement wait, ``KVStore.wait``): the only places
the tear-down raises in a rank thread."""


@contextlib.contextmanager
def teardowns_in_finalizers(landed: list[str]) -> Iterator[None]:
    """Note, rather than print, a teardown that a finalizer swallowed.

    The teardown's exception can reach a rank thread while it runs a finalizer (an earlier
    pipeline's ``Engine.__del__``, blocked in a store call: docs/faults.md, Findings 8), which
    ignores it; Python then prints a traceback on stderr, as if something had crashed. Such a
    landing goes to ``landed`` (the launch's notes) instead, since the teardown raises again
    while the thread lives; every other ignored exception reaches the hook as before."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, GroupTornDown):
            previous(unraisable)
            return
        where = getattr(unraisable.object, "__qualname__", None) or repr(unraisable.object)
        landed.append(
            f"{threading.current_thread().name}: the group's teardown reached it in {where}, "
            "a finalizer, which ignored it; raised again while the thread lived"
        )

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _tear_down(threads: list[threading.Thread], group: RankGroup) -> None:
    """Raise :class:`GroupTornDown` in every rank thread still inside its rank that is
    waiting in one of Zephon's poll loops; it is delivered at the thread's next bytecode, so
    a waiting rank ends within one poll. Anywhere else an asynchronous exception can land
    inside a library's critical section (a file lock half taken stays held: the next launch
    over the same data then waits on it forever, seen in a 15-minute run), so a rank that is
    not waiting is left to stop at its next step (``GroupStopped``) or its own timeout.
    Called again while the thread lives: a finalizer that was running when it arrived
    ignores it."""
    frames = sys._current_frames()
    for rank, t in enumerate(threads):
        if rank in group.ended or not t.is_alive() or t.ident is None:
            continue
        if _waiting_in_zephon(frames.get(t.ident)):
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(t.ident), ctypes.py_object(GroupTornDown)
            )


def _waiting_in_zephon(frame: Any) -> bool:
    """The innermost Python frame is one of Zephon's poll loops, which a sleeping rank is in
    (``time.sleep`` has no frame of its own). A rank inside a store call is not: its C++
    client may block for good (a connection's validation on a link that delivers nothing),
    and an exception pending on a thread that never returns to Python kept the whole
    in-process tier spinning past every deadline (seen in a 15-minute run); it is asked
    again at the next poll."""
    if frame is None:
        return False
    code = frame.f_code
    return any(
        code.co_filename.endswith(path) and code.co_name == name for path, name in ZEPHON_POLLS
    )


def _scheduled(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and "(scheduled fault)" in str(exc)


def _result(
    spec: LaunchSpec,
    spec_file: Path,
    world: int,
    errors: dict[int, BaseException],
    tracebacks: dict[int, str],
    finished_at: dict[int, float],
    timed_out: bool,
    stacks: dict[str, str],
    started: float,
) -> GroupResult:
    ranks: list[RankOutcome] = []
    first: RankOutcome | None = None
    for rank in range(world):
        exc = errors.get(rank)
        stopped = isinstance(exc, (GroupStopped, GroupTornDown))
        code = 0 if exc is None else (STOPPED_EXITCODE if stopped else 1)
        outcome = RankOutcome(
            rank=rank,
            local_rank=rank,
            node=0,
            pid=None,
            exitcode=-9 if timed_out and exc is None else code,
            error=None if exc is None else f"{type(exc).__name__}: {exc}",
            traceback=tracebacks.get(rank),
            killed_by_harness=stopped or timed_out,
        )
        ranks.append(outcome)
    failing = [r for r in ranks if r.error is not None and r.exitcode != STOPPED_EXITCODE]
    if failing:
        first = min(failing, key=lambda r: finished_at.get(r.rank, float("inf")))
    failed = timed_out or any(r.exitcode != 0 for r in ranks)
    return GroupResult(
        name=spec.name,
        agent_returncodes=[1 if failed else 0],
        ranks=ranks,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        workdir=spec_file.parent,
        agent_logs=[],
        first_failure=first,
        stacks=stacks,
        notes=["in-process tier: ranks are threads of one interpreter"],
    )


def _stacks(threads: list[threading.Thread]) -> dict[str, str]:
    """Each rank thread's stack, innermost first, in faulthandler's layout."""
    frames = sys._current_frames()
    out: dict[str, str] = {}
    for t in threads:
        frame = frames.get(t.ident or -1)
        if frame is None:
            continue
        lines = [f"Current thread {t.ident or 0:#018x} (most recent call first):"]
        for summary in reversed(traceback.extract_stack(frame)):
            lines.append(f'  File "{summary.filename}", line {summary.lineno} in {summary.name}')
        out[t.name] = "\n".join(lines) + "\n"
    return out


def _children() -> set[int]:
    with contextlib.suppress(psutil.Error):
        return {c.pid for c in psutil.Process().children(recursive=True)}
    return set()


def _kill_new_children(before: set[int]) -> None:
    """Processes a stuck launch's pipelines started (worker pools) go with it."""
    for pid in sorted(_children() - before):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
