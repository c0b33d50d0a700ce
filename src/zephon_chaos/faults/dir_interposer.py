"""The interposer of ``aggregate_dir``: a rank's round files seen and faulted as its store keys.

With aggregation ``dir`` Zephon's ``FileCoordinator`` (``zephon/_internal/coordination.py``)
runs the checkpoint round over files in ``<aggregate_dir>/<run_id>/.zephon_agg/``. Each write
of a round file is classified into the store interposer's phases (``faults.interposer``) and
handed to the same :class:`~zephon_chaos.faults.interposer.PhaseWrites`: the same ``write`` and
``fired`` events in the same file (``interposer.events_path``), the same trigger actions.

============  ==================================  ===================================
phase         file written (``backend.put``)      by (``FileCoordinator``)
============  ==================================  ===================================
announce      ``round.current``                   ``_write_announcement`` (the leader)
shard         ``state_r<r>_w<w>_p<pid>_<id>.ckpt``  ``_publish_shard`` (every participant)
participants  none: the leader lists the shards   (``_list_state_files``, a glob)
outcome       ``merged_<id>.ckpt`` (result),      ``_publish_result`` / ``_publish_failure``
              ``failed_<id>.txt`` (failure)       (the leader)
ack           ``state_..._<id>.ckpt.ack``         ``RoundCoordinator._follow`` (followers)
============  ==================================  ===================================

Zephon has no extension point for the storage of ``aggregate_dir``: ``RouterStorageBackend``
(``zephon/_internal/io/storage/router.py``, ``_backend_for``) routes by URL scheme and refuses
any scheme it does not know. So the narrowest hook is the coordinator's own backend object,
wrapped for one pipeline only (rank threads share a process: nothing process-wide is patched).
It relies on these lines of Zephon 0.2.0:

* ``zephon/_internal/pipeline.py``, ``Pipeline._ensure``: the one place an ``Engine`` is built
  (again after a close), called as ``self._ensure()`` by iteration, ``checkpoint`` and
  ``restore``; the pipeline's own ``_ensure`` attribute is wrapped;
* ``zephon/_internal/engine.py``, ``Engine.__init__``: ``self._coordinator = make_coordinator``;
* ``zephon/_internal/coordination.py``, ``FileCoordinator.__init__``: ``self.backend =
  RouterStorageBackend()``, and every round write goes through ``self.backend.put``
  (``_write_announcement``, and ``_put`` from ``_publish_shard``, ``_publish_result``,
  ``_publish_failure`` and ``_follow``'s ack at ``_ack_location``).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from enum import Enum
from pathlib import PurePosixPath
from typing import Any

from zephon_chaos.faults.interposer import InterposerError, InterposerPlan, PhaseWrites
from zephon_chaos.workload.spec import ROUND_PHASES

AGG_DIR_NAME = ".zephon_agg"
"""The folder of a run's round files (``FileCoordinator.agg_dir``)."""
_STATE = r"state_r\d+_w\d+_p\d+_[^/]+\.ckpt"
_FILE_PHASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"round\.current"), "announce"),
    (re.compile(_STATE), "shard"),
    (re.compile(_STATE + r"\.ack"), "ack"),
    (re.compile(r"merged_[^/]+\.ckpt"), "outcome"),
    (re.compile(r"failed_[^/]+\.txt"), "outcome"),
)


class NoFileCounterpart(Enum):
    """A round point of the store protocol that the file protocol has no write for."""

    PARTICIPANTS = (
        "aggregate_dir has no participants write: the leader finds the shards by listing the "
        "round's state files (FileCoordinator._list_state_files)"
    )


ABSENT_ON_DIR: dict[str, NoFileCounterpart] = {"participants": NoFileCounterpart.PARTICIPANTS}
"""Round points without a file write, by name."""
DIR_PHASES: tuple[str, ...] = tuple(p for p in ROUND_PHASES if p not in ABSENT_ON_DIR)
"""The round points a rank writes with aggregation ``dir``, in protocol order."""


def absent_on_dir(point: str) -> NoFileCounterpart | None:
    """Why ``point`` has no file write under ``aggregate_dir``, or None when it has one."""
    return ABSENT_ON_DIR.get(point)


def phase_of_file(path: str) -> str | None:
    """The round phase a write of ``path`` belongs to, or None (not a round file)."""
    p = PurePosixPath(path)
    if p.parent.name != AGG_DIR_NAME:
        return None
    return next((phase for rx, phase in _FILE_PHASES if rx.fullmatch(p.name)), None)


def outcome_of_file(path: str) -> str:
    """``result`` for the merged checkpoint, ``failure`` for the leader's failure notice."""
    return "result" if PurePosixPath(path).name.startswith("merged_") else "failure"


class DirInterposerError(InterposerError):
    """The dir interposer cannot wrap this pipeline; the message names why and the way out."""


class PhasedBackend:
    """A ``FileCoordinator``'s storage backend: round-file writes go through ``writes``, every
    other call (reads, listings, deletes, mkdir) reaches the wrapped backend as is."""

    def __init__(self, inner: Any, writes: PhaseWrites) -> None:
        self.inner = inner
        self.writes = writes

    def put(self, path: str, data: bytes) -> None:
        phase = phase_of_file(path)
        if phase is None:
            self.inner.put(path, data)
            return
        extra = {"outcome": outcome_of_file(path)} if phase == "outcome" else {}
        self.writes.write(phase, path, lambda: self.inner.put(path, data), None, **extra)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def check_plan(plan: InterposerPlan) -> None:
    """Raise DirInterposerError for a trigger at a point the file protocol does not have."""
    for i, trigger in enumerate(plan.triggers):
        absent = absent_on_dir(trigger.phase)
        if absent is not None:
            raise DirInterposerError(
                f"triggers[{i}].phase: {absent.value}; time it by one of {DIR_PHASES} or use "
                "aggregation 'store'"
            )


def interpose_pipeline(pipe: Any, plan: InterposerPlan) -> PhaseWrites:
    """Route the round-file writes of every engine ``pipe`` builds through ``plan``.

    One :class:`PhaseWrites` a pipeline, so a write's n counts across engine rebuilds as the
    store interposer's counts across its rounds; its event file closes with the pipeline.
    """
    check_plan(plan)
    build: Callable[[], None] | None = getattr(pipe, "_ensure", None)
    if build is None or not hasattr(pipe, "_engine"):
        raise DirInterposerError(
            f"{type(pipe).__name__} has no _ensure/_engine: this Zephon builds its engine "
            "elsewhere than Pipeline._ensure (zephon/_internal/pipeline.py), which the dir "
            "interposer wraps; use aggregation 'store' for round-point faults"
        )
    writes = PhaseWrites(plan)
    weakref.finalize(pipe, writes.close)

    def ensure() -> None:
        build()
        coordinator = getattr(pipe._engine, "_coordinator", None)
        backend = getattr(coordinator, "backend", None)
        if backend is None:
            raise DirInterposerError(
                f"the engine's coordinator ({type(coordinator).__name__}) has no file backend "
                "(FileCoordinator.backend, zephon/_internal/coordination.py): the dir "
                "interposer needs aggregation 'dir'"
            )
        if not isinstance(backend, PhasedBackend):
            coordinator.backend = PhasedBackend(backend, writes)

    pipe._ensure = ensure
    return writes
