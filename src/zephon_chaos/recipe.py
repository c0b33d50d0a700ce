"""The contract a training recipe follows so that ``recipe_run`` can launch, fault and judge it.

A recipe script runs under torchrun and stays an ordinary training script; it adds a
:class:`RecipeRun` that reads what the plugin set in the environment:

==============================  ==========================================================
``ZEPHON_CHAOS_RECORDS_DIR``    where per-rank records go (``records/rank<R>.jsonl``)
``ZEPHON_CHAOS_CKPT_DIR``       where this launch persists its checkpoints
``ZEPHON_CHAOS_RESTORE``        a checkpoint directory to resume from (empty: start fresh)
``ZEPHON_CHAOS_STEPS``          optimizer steps of the whole schedule (a resumed launch
                                runs the rest of it)
``ZEPHON_CHAOS_CHECKPOINT_EVERY``  checkpoint after every k-th optimizer step (0: never)
``ZEPHON_CHAOS_FAULTS``         ``rank:step:action`` items (comma-separated) fired by
                                :meth:`RecipeRun.step_begins`
``ZEPHON_CHAOS_BACKEND``        ``gloo`` or ``nccl`` (one CUDA device per ``LOCAL_RANK``)
``ZEPHON_RUN_ID``,              read by the recipe's loader config, as in production
``ZEPHON_AGGREGATE_STORE``,
``ZEPHON_CANONICAL_REPLICAS``
==============================  ==========================================================

Per optimizer step ``s`` the recipe calls ``run.step_begins(s)`` (faults fire here; False
means the run is preempted and should stop cleanly), ``run.record_batch(batch)`` for every
loader batch it consumes, and at a checkpoint ``state = run.checkpoint(pipe.checkpoint, s)``;
then it persists its model under ``run.checkpoint_dir(s)`` and, on rank 0 and last,
``run.save_loader_state(s, state)``: a directory holding the loader state is complete. A
barrier after that keeps every rank from running ahead of rank 0's write.

This module runs inside the ranks: it imports neither pytest nor torch.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zephon_chaos.errors import InvalidInput
from zephon_chaos.lanes import lanes_of
from zephon_chaos.workload.atomic import replacing
from zephon_chaos.workload.persist import digest
from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.self_faults import signal_self

ENV_RECORDS_DIR = "ZEPHON_CHAOS_RECORDS_DIR"
ENV_CKPT_DIR = "ZEPHON_CHAOS_CKPT_DIR"
ENV_RESTORE = "ZEPHON_CHAOS_RESTORE"
ENV_STEPS = "ZEPHON_CHAOS_STEPS"
ENV_CHECKPOINT_EVERY = "ZEPHON_CHAOS_CHECKPOINT_EVERY"
ENV_FAULTS = "ZEPHON_CHAOS_FAULTS"
ENV_BACKEND = "ZEPHON_CHAOS_BACKEND"
ENV_CANONICAL_REPLICAS = "ZEPHON_CANONICAL_REPLICAS"

LOADER_STATE_FILE = "loader-state.pkl"
"""Written last, by rank 0: its presence marks a checkpoint directory as complete."""

FAULT_ACTIONS = ("sigkill", "sigterm", "exit", "raise", "preempt")
"""What a scheduled fault does; ``preempt`` stops every rank cleanly (applies to all ranks)."""


class RecipeContractError(InvalidInput, RuntimeError):
    """The environment does not describe a recipe run; the message names the variable."""


@dataclass(frozen=True)
class Fault:
    """``rank`` (or None: every rank) does ``action`` before optimizer step ``at_step``."""

    rank: int | None
    at_step: int
    action: str

    def encode(self) -> str:
        return f"{'*' if self.rank is None else self.rank}:{self.at_step}:{self.action}"

    @classmethod
    def parse(cls, text: str) -> Fault:
        parts = text.strip().split(":")
        if len(parts) != 3 or parts[2] not in FAULT_ACTIONS:
            raise RecipeContractError(
                f"{ENV_FAULTS}: {text!r} is not rank:step:action with action in "
                f"{', '.join(FAULT_ACTIONS)}"
            )
        rank, step, action = parts
        try:
            return cls(None if rank == "*" else int(rank), int(step), action)
        except ValueError:
            raise RecipeContractError(
                f"{ENV_FAULTS}: {text!r}: rank and step must be integers ('*' for every rank)"
            ) from None


def parse_faults(text: str) -> tuple[Fault, ...]:
    return tuple(Fault.parse(item) for item in text.split(",") if item.strip())


@dataclass
class RecipeRun:
    """One rank's view of a recipe run: schedule, faults, records and checkpoint locations."""

    rank: int
    world_size: int
    canonical_replicas: int
    records_dir: Path
    ckpt_dir: Path
    restore_from: Path | None
    steps: int
    checkpoint_every: int
    backend: str = "gloo"
    faults: tuple[Fault, ...] = ()
    mapping: str = "contiguous"
    lane_counts: dict[int, int] = field(default_factory=dict, init=False)
    """Batches per lane consumed by this launch (what the oracle counts per checkpoint)."""
    _writer: RecordWriter | None = field(default=None, init=False, repr=False)
    _batches: int = field(default=0, init=False)
    _checkpoints: int = field(default=0, init=False)

    # ---- construction ----------------------------------------------------------------
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecipeRun:
        """Read the contract's variables (and torchrun's RANK/WORLD_SIZE); start the records."""
        env = os.environ if environ is None else environ
        records = _required(env, ENV_RECORDS_DIR)
        restore = env.get(ENV_RESTORE) or None
        run = cls(
            rank=_int(env, "RANK", 0),
            world_size=_int(env, "WORLD_SIZE", 1),
            canonical_replicas=_int(env, ENV_CANONICAL_REPLICAS, _int(env, "WORLD_SIZE", 1)),
            records_dir=Path(records),
            ckpt_dir=Path(_required(env, ENV_CKPT_DIR)),
            restore_from=Path(restore) if restore else None,
            steps=_int(env, ENV_STEPS, 0),
            checkpoint_every=_int(env, ENV_CHECKPOINT_EVERY, 0),
            backend=env.get(ENV_BACKEND) or "gloo",
            faults=parse_faults(env.get(ENV_FAULTS, "")),
        )
        if run.canonical_replicas % run.world_size:
            raise RecipeContractError(
                f"{ENV_CANONICAL_REPLICAS}={run.canonical_replicas} is not a multiple of "
                f"WORLD_SIZE={run.world_size}: one optimizer step takes C/G batches per rank"
            )
        run.start()
        return run

    @property
    def lanes(self) -> list[int]:
        return lanes_of(self.rank, self.world_size, self.canonical_replicas, self.mapping)

    @property
    def microbatches(self) -> int:
        """Loader batches one rank consumes per optimizer step: C/G."""
        return self.canonical_replicas // self.world_size

    def start(self) -> None:
        self._writer = RecordWriter(self.records_dir, self.rank)
        self._writer.write(
            "start",
            rank=self.rank,
            world=self.world_size,
            lanes=self.lanes,
            pid=os.getpid(),
            restored=str(self.restore_from) if self.restore_from else None,
        )
        self._writer.flush()

    @property
    def writer(self) -> RecordWriter:
        if self._writer is None:
            raise RecipeContractError("RecipeRun was not started; build it with from_env()")
        return self._writer

    # ---- per step ----------------------------------------------------------------------
    def step_begins(self, step: int) -> bool:
        """Call before optimizer step ``step``; fires this rank's faults. False: stop cleanly."""
        for fault in self.faults:
            if fault.at_step != step or fault.rank not in (None, self.rank):
                continue
            self.writer.write("fault", rank=self.rank, at_step=step, action=fault.action,
                              pid=os.getpid())
            self.writer.flush()
            if fault.action == "preempt":
                return False
            _fire(fault.action, self.rank, step)
        return True

    def record_batch(self, batch: Any) -> None:
        """Record one loader batch (a Zephon ``SampleBatch``) in the oracle's format."""
        lane = int(batch.lane_ids[0])
        ids = [[int(x) for x in sid] for sid in batch.ids]
        self.lane_counts[lane] = self.lane_counts.get(lane, 0) + 1
        self.writer.write("batch", i=self._batches, lane=lane, ids=ids, ckpts=self._checkpoints)
        self._batches += 1
        if self._batches % max(1, self.microbatches) == 0:
            self.writer.flush()

    def should_checkpoint(self, step: int) -> bool:
        """Whether to checkpoint after optimizer step ``step`` (0-based) completes."""
        return self.checkpoint_every > 0 and (step + 1) % self.checkpoint_every == 0

    # ---- checkpoints -------------------------------------------------------------------
    def checkpoint(self, take: Callable[[], dict[str, Any]], step: int) -> dict[str, Any]:
        """Call the loader's collective ``take()`` (``pipe.checkpoint``) and record the round."""
        started = time.monotonic()
        base = {"index": self._checkpoints, "after_batches": self._batches, "step": step + 1}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                state = take()
            except Exception as exc:
                self.writer.write("checkpoint", **base, ok=False,
                                  error=f"{type(exc).__name__}: {exc}",
                                  lane_counts=self.lane_counts,
                                  duration_s=time.monotonic() - started)
                self.writer.flush()
                raise
        self.writer.write(
            "checkpoint",
            **base,
            ok=True,
            lane_counts=self.lane_counts,
            digest=digest(state),
            lanes_covered=sorted(int(k) for k in (state.get("progress") or {})),
            warnings=[str(w.message) for w in caught],
            duration_s=time.monotonic() - started,
        )
        self.writer.flush()
        self._checkpoints += 1
        return state

    def checkpoint_dir(self, step: int) -> Path:
        """Where the checkpoint after ``step`` completed steps lives (``<ckpt dir>/step-N``)."""
        return checkpoint_dir(self.ckpt_dir, step + 1)

    def save_loader_state(self, step: int, state: dict[str, Any]) -> Path:
        """Rank 0, last: persist the merged loader state (atomically), completing the directory."""
        target = self.checkpoint_dir(step)
        target.mkdir(parents=True, exist_ok=True)
        payload = {"step": step + 1, "loader": state}
        with replacing(target / LOADER_STATE_FILE) as f:
            pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
        return target

    def load_loader_state(self) -> tuple[int, dict[str, Any]] | None:
        """(completed steps, merged loader state) of ``ZEPHON_CHAOS_RESTORE``, or None."""
        if self.restore_from is None:
            return None
        path = self.restore_from / LOADER_STATE_FILE
        if not path.is_file():
            raise RecipeContractError(
                f"{ENV_RESTORE}={self.restore_from} holds no {LOADER_STATE_FILE}: it is not a "
                "complete checkpoint (rank 0 writes the loader state last)"
            )
        with open(path, "rb") as f:
            payload = pickle.load(f)
        return int(payload["step"]), payload["loader"]

    # ---- anything else -----------------------------------------------------------------
    def note(self, kind: str, **fields: Any) -> None:
        """Record a fact of the recipe's own (a loss, a parameter checksum) for its tests."""
        if kind in ("start", "batch", "checkpoint", "exhausted", "end"):
            raise ValueError(f"{kind!r} is a record kind of the oracle; pick another name")
        self.writer.write(kind, rank=self.rank, **fields)
        self.writer.flush()

    def end(self) -> None:
        """The run reached its end (or a preemption) without failing."""
        self.writer.write("end", batches=self._batches)
        self.writer.close()
        self._writer = None


def checkpoint_dir(root: Path | str, completed_steps: int) -> Path:
    return Path(root) / f"step-{completed_steps:06d}"


def complete_checkpoints(root: Path | str) -> dict[int, Path]:
    """Completed steps → directory, for every directory under ``root`` holding loader state."""
    found: dict[int, Path] = {}
    base = Path(root)
    if not base.is_dir():
        return found
    for entry in base.iterdir():
        if entry.name.startswith("step-") and (entry / LOADER_STATE_FILE).is_file():
            with contextlib.suppress(ValueError):
                found[int(entry.name[5:])] = entry
    return found


def _fire(action: str, rank: int, step: int) -> None:
    if not signal_self(action) and action == "raise":
        raise RuntimeError(f"rank {rank} raises before step {step} (scheduled fault)")


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise RecipeContractError(
            f"{name} is not set: launch the recipe through the recipe_run fixture, or export "
            f"it (see zephon_chaos.recipe)"
        )
    return value


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise RecipeContractError(f"{name}={raw!r} is not an integer") from None
