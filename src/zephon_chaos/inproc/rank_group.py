"""One in-process launch's shared state: where its rank threads stop, meet and agree, and
whose warnings are whose (``catch_warnings`` is process-wide)."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from zephon_chaos.inproc.collective import CollectiveBroken, ThreadCollective
from zephon_chaos.rank.hooks import RankHooks


# GroupStopped and GroupTornDown stay outside the ChaosError tree (``zephon_chaos.errors``):
# they are this tier's stand-in for a signal ending a rank process, raised inside a rank
# thread and caught by the launcher, which records the rank as stopped. No caller ever sees
# one, and an ``except ChaosError`` in the code a rank runs must not swallow one.
class GroupStopped(RuntimeError):
    """Raised inside a rank thread to end it where torchrun would have ended its process."""


class GroupTornDown(BaseException):
    """Raised asynchronously in a rank thread still running after another rank failed, as
    torchrun's agent kills a failed group's processes wherever they are (inside a store wait,
    say). A BaseException, so that no ``except Exception`` in the code under test turns it
    into a failure of its own."""


class WarningRouter:
    """Routes warnings to the rank thread that emitted them (``catch_warnings`` is global)."""

    def __init__(self) -> None:
        self._lists: dict[int, list[Any]] = {}
        self._lock = threading.Lock()

    def show(
        self,
        message: Any,
        category: Any,
        filename: str,
        lineno: int,
        file: Any = None,
        line: Any = None,
    ) -> None:
        with self._lock:
            target = self._lists.get(threading.get_ident())
        if target is not None:
            target.append(warnings.WarningMessage(message, category, filename, lineno, file, line))

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Any]]:
        caught: list[Any] = []
        ident = threading.get_ident()
        with self._lock:
            self._lists[ident] = caught
        try:
            yield caught
        finally:
            with self._lock:
                self._lists.pop(ident, None)


class RankThreads:
    """The threads now running a rank of an in-process launch, for what must tell them from
    the rest of this process: their ``sys.stderr`` writes (``commands.native_stderr``)."""

    def __init__(self) -> None:
        self._idents: set[int] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        ident = threading.get_ident()
        with self._lock:
            self._idents.add(ident)
        try:
            yield
        finally:
            with self._lock:
                self._idents.discard(ident)

    def current(self) -> bool:
        """The calling thread runs a rank."""
        return threading.get_ident() in self._idents

    @contextlib.contextmanager
    def inheriting(self) -> Iterator[None]:
        """Within: a thread that a rank thread starts runs as a rank thread too, and so on
        down. Zephon writes from threads of its own (a pipeline stage's ``logging`` warning,
        with no handler configured, lands on ``sys.stderr``), and a thread does not know who
        started it: ``Thread.start`` is wrapped here, for this scope only, because nothing
        else tells a rank's threads from the harness's."""
        original = threading.Thread.start
        ranks = self

        def start(thread: threading.Thread) -> None:
            if ranks.current():
                run = thread.run

                def run_as_rank() -> None:
                    with ranks.running():
                        run()

                thread.run = run_as_rank  # type: ignore[method-assign]
            original(thread)

        threading.Thread.start = start  # type: ignore[method-assign]
        try:
            yield
        finally:
            threading.Thread.start = original  # type: ignore[method-assign]


RANK_THREADS = RankThreads()


@dataclass
class RankGroup:
    """Shared state of one launch's rank threads."""

    world: int
    stop_from_checkpoint: int | None
    faulted: set[int]
    lockstep: bool = True
    """``sync: lockstep``: the ranks meet before each checkpoint, as a rank process does."""
    collective: ThreadCollective = field(init=False)
    """The meetings and agreements a rank process holds over its process group."""
    stop_at_batch: dict[int, int] = field(default_factory=dict)
    """Per surviving rank: where torchrun would end it, once the crashed rank is gone."""
    failed: threading.Event = field(default_factory=threading.Event)
    stop_reason: str = ""
    ended: set[int] = field(default_factory=set)
    """Ranks whose thread left ``run_rank`` (an exception raised in it now would be lost)."""
    torn_down_at: float | None = None
    """When the launcher released the store or raised in the rank threads: from then on a
    rank's failure is the teardown's doing (torchrun's agent would have SIGTERMed it)."""

    def __post_init__(self) -> None:
        self.collective = ThreadCollective(self.world)

    def fail(self, reason: str) -> None:
        """The group is done for (``reason``): ranks stop at their next step, and none waits
        in a meeting any more, whatever its peers are doing."""
        self.stop_reason = reason
        self.failed.set()
        self.collective.break_(reason)

    def left(self, rank: int, exc: BaseException) -> None:
        """Rank ``rank``'s thread ended with ``exc``: no peer waits for it in a meeting."""
        self.collective.break_(f"rank {rank} left the group: {type(exc).__name__}: {exc}")

    def _all_min(self, rank: int, value: int, where: str) -> int:
        try:
            return self.collective.all_min(rank, value)
        except CollectiveBroken as exc:  # torchrun's agent would end this rank now
            raise GroupStopped(f"rank {rank} stopped with its group {where}: {exc}") from None

    def hooks(self, rank: int, router: WarningRouter) -> RankHooks:
        def on_step(n: int, taken: int) -> None:
            if self.failed.is_set():
                raise GroupStopped(f"rank {rank} stopped with its group: {self.stop_reason}")
            at = self.stop_at_batch.get(rank)
            limit = self.stop_from_checkpoint
            if at is not None and n >= at and limit is not None and taken >= limit:
                raise GroupStopped(
                    f"rank {rank} stopped with its group at batch {n}: a rank's scheduled "
                    "fault ended the launch"
                )

        def before_checkpoint(index: int) -> None:
            on_step(-1, index)
            limit = self.stop_from_checkpoint
            if limit is not None and index >= limit and rank not in self.faulted:
                raise GroupStopped(
                    f"rank {rank} stopped with its group before checkpoint {index}: a rank's "
                    "scheduled fault ended the launch"
                )
            if self.lockstep:
                self._all_min(rank, 1, f"before the meeting of checkpoint {index}")

        def agree(ok: bool) -> bool:
            return bool(self._all_min(rank, int(ok), "in a checkpoint agreement"))

        return RankHooks(
            on_step=on_step,
            before_checkpoint=before_checkpoint,
            agree=agree,
            capture_warnings=router.capture,
        )


