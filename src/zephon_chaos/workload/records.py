"""Per-rank record files: one JSON line per event, flushed per step so a crash loses nothing.

The oracle reads these back; both sides use this module, so the format has one definition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

SampleId = tuple[int, int, int]
CHILD_FAULT_RECORD = "child-fault"
"""A rank killed its pipeline's children (``ChildFault``): ``at_step``, ``target``, ``at``
(monotonic), ``killed`` (the PIDs signalled) and ``before`` (its workers just before), among
the rank's ``events``."""
BEGAN_RECORD = "began"
"""A rank's loop began (``run_rank``): its process group had formed and its harness set-up was
done, so from here on the code under test ran. Written first and flushed at once."""
WORKERS_RECORD = "workers"
"""A rank with a child fault, after its last batch: ``pids``, its live pipeline workers
(replacements, where the killed ones were replaced)."""
CHECKPOINT_BEGUN = "checkpoint_begun"
"""A rank's call of ``checkpoint()`` began (``index``, ``started_at``), written before it."""
LINK_HEALED_RECORD = "link_healed"
"""A rank removed a fault from its own store link once the ``checkpoint()`` call it fired in
had returned or raised (``ProxyFault.until``): ``index`` and ``attempt`` of that call,
``phase`` and ``n`` of the round point that fired it, ``action`` (``cut``: the proxy was
disabled; ``toxic``: a toxic was added) and ``at`` (monotonic)."""


def record_path(out_dir: Path | str, rank: int) -> Path:
    return Path(out_dir) / "records" / f"rank{rank}.jsonl"


class RecordWriter:
    def __init__(self, out_dir: Path | str, rank: int) -> None:
        path = record_path(out_dir, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, kind: str, **fields: Any) -> None:
        self._f.write(json.dumps({"kind": kind, **fields}) + "\n")

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()


@dataclass
class Batch:
    index: int
    lane: int
    ids: list[SampleId]
    checkpoints_before: int
    fetch_at: float | None = None
    """Monotonic time (CLOCK_MONOTONIC: one clock for a host's ranks) when its next() began."""
    fetch_s: float | None = None
    """How long that next() blocked."""


@dataclass
class CheckpointEvent:
    index: int
    after_batches: int
    ok: bool
    lane_counts: dict[int, int] = field(default_factory=dict)
    digest: str | None = None
    lanes_covered: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    duration_s: float = 0.0
    started_at: float | None = None
    """Monotonic time the checkpoint began (its first pipe.checkpoint() call)."""
    ended_at: float | None = None
    """Monotonic time its last pipe.checkpoint() call returned or raised."""
    skipped: bool = False
    """Failed, and trained past: under the ``skip`` retry policy, or by a free-running rank
    that gave up alone (``WorkloadSpec.draws_past_failures``)."""


@dataclass
class RankRecord:
    rank: int
    world_size: int = 0
    lanes: list[int] = field(default_factory=list)
    tp: int = 1
    """Ranks of this rank's DP group (its ``tp``); they read the same lanes."""
    restored: bool = False
    batches: list[Batch] = field(default_factory=list)
    checkpoints: list[CheckpointEvent] = field(default_factory=list)
    exhausted_after: int | None = None
    ended: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    restore_at: float | None = None
    """Monotonic time pipe.restore() began (None: nothing restored)."""
    restore_s: float | None = None
    exhausted_fetch: tuple[float, float] | None = None
    """(start, seconds) of the next() that raised StopIteration."""

    @property
    def began(self) -> bool:
        """The rank reached its loop (``BEGAN_RECORD``): the code under test ran on it."""
        return any(ev.get("kind") == BEGAN_RECORD for ev in self.events)

    @property
    def error(self) -> dict[str, Any] | None:
        """The rank's ``error`` record (why it failed, when, and ``fetch_at`` where its
        ``next()`` raised), if it failed."""
        return next((ev for ev in self.events if ev.get("kind") == "error"), None)


def read_rank(out_dir: Path | str, rank: int) -> RankRecord:
    """Read one rank's records; a torn last line (a crash mid-write) is ignored."""
    rec = RankRecord(rank=rank)
    path = record_path(out_dir, rank)
    if not path.exists():
        return rec
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        kind = ev.get("kind")
        if kind == "start":
            rec.world_size, rec.lanes = ev["world"], ev["lanes"]
            rec.tp = ev.get("tp", 1)
            rec.restored = ev.get("restored") is not None
            rec.restore_at, rec.restore_s = ev.get("restore_at"), ev.get("restore_s")
        elif kind == "batch":
            rec.batches.append(
                Batch(
                    ev["i"],
                    ev["lane"],
                    [tuple(x) for x in ev["ids"]],
                    ev["ckpts"],
                    ev.get("fetch_at"),
                    ev.get("fetch_s"),
                )
            )
        elif kind == "checkpoint":
            rec.checkpoints.append(
                CheckpointEvent(
                    index=ev["index"],
                    after_batches=ev["after_batches"],
                    ok=ev["ok"],
                    lane_counts={int(k): v for k, v in ev.get("lane_counts", {}).items()},
                    digest=ev.get("digest"),
                    lanes_covered=ev.get("lanes_covered", []),
                    warnings=ev.get("warnings", []),
                    error=ev.get("error"),
                    duration_s=ev.get("duration_s", 0.0),
                    started_at=ev.get("started_at"),
                    ended_at=ev.get("ended_at"),
                    skipped=bool(ev.get("skipped")),
                )
            )
        elif kind == "exhausted":
            rec.exhausted_after = ev["after_batches"]
            if ev.get("fetch_at") is not None:
                rec.exhausted_fetch = (ev["fetch_at"], ev["fetch_s"])
        elif kind == "end":
            rec.ended = True
        else:
            rec.events.append(ev)
    return rec


def read_phase(out_dir: Path | str, world_size: int) -> list[RankRecord]:
    return [read_rank(out_dir, r) for r in range(world_size)]
