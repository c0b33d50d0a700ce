"""Watch a launch for a hang someone above already knows, and end it there, not at its deadline.

A launch that hangs in a known way (a known defect of the code under test) otherwise runs to
its deadline, minutes of a search that learns nothing from them. While a group runs, its
watcher notes progress, a logical event: the files its ranks and processes write (records,
checkpoints, the PID directory) growing. Once nothing has progressed for ``quiet_s`` and the
caller says the hang's trigger has fired, it takes the ranks' stacks (the same bounded capture
as at a deadline) and asks the caller whether they show a known hang. On a match the group
ends as at a deadline, its result cut short by that hang (:class:`~.result.CutShort`); no
match, and it keeps its full deadline, checked again after each further quiet period, at most
``max_checks`` times, so captures never slow a launch down.

The quiet period must outlast every healthy silence, so it is long (minutes with worker
processes). Some hangs need no waiting: their stacks *prove* them (every worker that could
release a lock waits for it). Where the caller can prove one (``prove``), the watch also
looks after each ``early_s`` of quiet (at most ``max_proofs`` times), and ends the launch
only when two captures in a row prove the same hang and nothing was written in between.

What a known hang looks like is the caller's: this layer gets callables (``armed``,
``recognise``), never the explorer's defects (``docs/architecture.md``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from zephon_chaos.launch.result import CutShort

Stacks = dict[str, str]
"""``{"rank 0 (pid 123)": stack text}``, as ``diagnostics.stacks`` captures them."""
Mark = tuple[int, int, int]
"""What a launch has written: (files, bytes, newest modification in ns)."""

POLL_S = 1.0
"""How often a watched group looks at its files: one directory walk a second is nothing
beside a launch's work, and a quiet period is tens of seconds."""
MAX_CHECKS = 3
"""Stack captures a watched launch may take before its deadline: each costs up to
``diagnostics.stacks.TOTAL_BUDGET_S`` with the ranks paused by py-spy."""
MAX_PROOFS = 8
"""Early checks (asks for a proof) a launch may take: more than full checks, since the
first ones may come while the hang is still forming (replacement workers importing torch,
a few silences of ``early_s`` each), and a launch is looked at only once its trigger fired."""


@dataclass(frozen=True)
class HangWatch:
    """What a launch is watched for, from the caller: carried by its ``LaunchSpec``.

    ``recognise`` names the known hang ``stacks`` show (None: none); ``armed`` says whether
    some known hang's trigger has fired in this launch (no capture before); ``watched``: the
    folders whose growth is the ranks' progress (the group adds its own PID folder)."""

    quiet_s: float
    recognise: Callable[[Stacks], str | None]
    armed: Callable[[], bool] = lambda: True
    watched: tuple[Path, ...] = ()
    max_checks: int = MAX_CHECKS
    poll_s: float = POLL_S
    prove: Callable[[Stacks], str | None] | None = None
    """The known hang ``stacks`` prove whatever the time (None: none); asked after each
    ``early_s`` of quiet, before the quiet period is over."""
    early_s: float | None = None
    max_proofs: int = MAX_PROOFS

    def __post_init__(self) -> None:
        if self.quiet_s <= 0 or self.poll_s <= 0:
            raise ValueError(
                f"a hang watch needs a positive quiet period and poll interval, got "
                f"quiet_s={self.quiet_s}, poll_s={self.poll_s}"
            )
        unpaired = (self.prove is None) != (self.early_s is None)
        if unpaired or (self.early_s is not None and self.early_s <= 0):
            raise ValueError(
                f"a hang watch proves hangs with both a proof and a positive early period, "
                f"got prove={self.prove!r}, early_s={self.early_s}"
            )


@dataclass(frozen=True)
class Cut:
    """A launch to end now: why, and the stacks that showed it."""

    cut_short: CutShort
    stacks: Stacks


class Quiet:
    """How long a launch has made no progress, and whether a check is due (a pure clock:
    the caller passes the time and the progress mark, so tests need no sleeps)."""

    def __init__(
        self,
        quiet_s: float,
        max_checks: int,
        now: float,
        early_s: float | None = None,
        max_proofs: int = MAX_PROOFS,
    ) -> None:
        self.quiet_s = quiet_s
        self.early_s = early_s
        self.max_checks = max_checks
        self.max_proofs = max_proofs
        self.checks = 0
        self.early_checks = 0
        self._mark: object = None
        self._since = now
        self._next = now + quiet_s
        self._next_early = now + early_s if early_s is not None else float("inf")

    def silent_s(self, now: float) -> float:
        return now - self._since

    def moved(self, mark: object, now: float) -> bool:
        """Note ``mark``: True (and the quiet begins again) if it changed."""
        if mark == self._mark:
            return False
        self._mark, self._since = mark, now
        self._next = max(self._next, now + self.quiet_s)
        if self.early_s is not None:
            self._next_early = now + self.early_s
        return True

    def early_due(self, now: float) -> bool:
        """True when a proof is due: ``early_s`` more of quiet, short of the quiet period,
        and early checks left (call after ``due`` said no full check is)."""
        if self.early_checks >= self.max_proofs or now >= self._next:
            return False
        return now >= self._next_early

    def early_checked(self, now: float) -> None:
        """An early check proved nothing: the next one after a further ``early_s``."""
        self.early_checks += 1
        self._next_early = now + (self.early_s or 0.0)

    def due(self, mark: object, now: float) -> bool:
        """Note ``mark``; True when it has not changed for a quiet period since the last
        progress, or since the last check, and checks are left."""
        if self.moved(mark, now):
            return False
        return self.checks < self.max_checks and now >= self._next

    def checked(self, now: float) -> None:
        """A check found nothing: the next one after a further quiet period."""
        self.checks += 1
        self._next = now + self.quiet_s


class HangWatcher:
    """One launch's watch: polled by the group while it waits for its agents."""

    def __init__(
        self,
        watch: HangWatch,
        progress: Callable[[], object],
        collect: Callable[[], Stacks],
        started_at: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watch = watch
        self.progress = progress
        self.collect = collect
        self.started_at = started_at
        self.clock = clock
        self.quiet = Quiet(
            watch.quiet_s, watch.max_checks, clock(), watch.early_s, watch.max_proofs
        )

    @property
    def poll_s(self) -> float:
        return self.watch.poll_s

    def poll(self) -> Cut | None:
        """Look once: a :class:`Cut` when the launch is quiet, armed and its stacks show a
        known hang; None to wait on."""
        now = self.clock()
        mark = self.progress()
        if not self.quiet.due(mark, now):
            if self.quiet.early_due(now) and self.watch.armed():
                return self._prove(now)
            return None
        if not self.watch.armed():
            return None
        silent = self.quiet.silent_s(now)
        stacks = self.collect()
        defect = self.watch.recognise(stacks)
        after = self.clock()
        moved = self.quiet.moved(self.progress(), after)
        if defect is None or moved:  # the ranks wrote while their stacks were taken: no hang
            self.quiet.checked(after)
            return None
        return Cut(CutShort(defect, at_s=now - self.started_at, quiet_s=silent), stacks)

    def _prove(self, now: float) -> Cut | None:
        """Two captures in a row that prove the same hang, with nothing written meanwhile:
        one capture is not atomic (py-spy reads one process after another), two seconds
        apart cannot both catch a lock in the instant it changes hands."""
        assert self.watch.prove is not None
        silent = self.quiet.silent_s(now)
        defect = self.watch.prove(self.collect())
        stacks = self.collect() if defect is not None else {}
        again = self.watch.prove(stacks) if stacks else None
        after = self.clock()
        if self.quiet.moved(self.progress(), after) or defect is None or again != defect:
            self.quiet.early_checked(after)
            return None
        return Cut(CutShort(defect, at_s=now - self.started_at, quiet_s=silent), stacks)


def progress_mark(folders: Iterable[Path]) -> Mark:
    """Files under ``folders``, their bytes and the newest change: any write moves it
    (a file that vanishes mid-walk is skipped)."""
    count = size = newest = 0
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                try:
                    st = os.stat(os.path.join(root, name))
                except OSError:
                    continue
                count += 1
                size += st.st_size
                newest = max(newest, st.st_mtime_ns)
    return count, size, newest
