"""torchrun's own restart path, seen from a rank: where a restarted worker writes and resumes.

With ``--max-restarts`` torchrun starts every worker again after one fails, with the same
arguments and ``TORCHELASTIC_RESTART_COUNT`` = n. A spec with ``resume_on_restart`` makes
attempt n write its records and checkpoints under ``<out_dir>/restart<n>`` (so every attempt
can be judged as a phase of its own) and restore the latest checkpoint an earlier attempt
persisted, as a training script resuming from its last save does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

RESTART_VAR = "TORCHELASTIC_RESTART_COUNT"


def restart_count(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    return int(env.get(RESTART_VAR) or 0)


def attempt_dir(out_dir: str | Path, attempt: int) -> Path:
    """Where attempt ``attempt`` (0 = the first launch) writes."""
    return Path(out_dir) if attempt == 0 else Path(out_dir) / f"restart{attempt}"


def latest_checkpoint(out_dir: str | Path, before_attempt: int, suffix: str) -> Path | None:
    """The highest-indexed checkpoint of the latest earlier attempt that persisted one."""
    for attempt in range(before_attempt - 1, -1, -1):
        found = sorted(
            attempt_dir(out_dir, attempt).glob(f"ckpt-*.{suffix}"),
            key=lambda p: int(p.stem.split("-")[1]),
        )
        if found:
            return found[-1]
    return None


def restart_view(spec: Any, env: Mapping[str, str] | None = None) -> Any:
    """The spec attempt n of a restarted rank runs: its own folder, the latest checkpoint,
    and only the round-point triggers of the attempts they fire in (a crash inside attempt
    0's round is not the restarted workers' to repeat)."""
    n = restart_count(env)
    if n == 0:
        return spec
    spec = replace(
        spec,
        triggers=tuple(t for t in spec.triggers if t.until_attempt is None or n < t.until_attempt),
    )
    if not spec.resume_on_restart:
        return spec
    out = attempt_dir(spec.out_dir, n)
    out.mkdir(parents=True, exist_ok=True)
    suffix = spec.checkpoint_path(0).suffix.lstrip(".")
    latest = latest_checkpoint(spec.out_dir, n, suffix)
    restore = str(latest) if latest is not None else spec.restore_from
    return replace(spec, out_dir=str(out), restore_from=restore)


MET_ROUND = "met_round"
"""The record kind of what a restarted attempt's rank 0 found open in its namespace."""


def met_round(spec: Any, env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """What restarted attempt n meets (None in attempt 0): the round a dead attempt left
    announced with no result in this attempt's namespace, read without touching it, before
    this attempt's leader can announce one of its own. As a record's fields: ``round`` None
    where none is open, ``error`` where it could not be read.

    The round lives where the aggregation keeps it: torchrun's agent store (``torch://`` is
    ``MASTER_ADDR``/``MASTER_PORT``, and the agent's store survives ``--max-restarts``), the
    hosted store (``torch://host:port``), or ``aggregate_dir``.
    """
    env = os.environ if env is None else env
    n = restart_count(env)
    if n == 0:
        return None
    from zephon_chaos.faults.leftover_round import DirRounds, StoreRounds, launch_scope

    mode = spec.pipeline.aggregation
    try:
        scope = launch_scope(spec, n)
        if scope is None:
            return {"attempt": n, "scope": None, "round": None}
        place: Any
        if mode == "dir":
            place = DirRounds(Path(spec.aggregate_dir))
        elif mode == "store_explicit":
            place = StoreRounds(str(spec.store_uri).removeprefix("torch://"))
        else:
            place = StoreRounds(f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}")
        found = place.open_round(scope)
    except (RuntimeError, OSError, ValueError, KeyError) as exc:
        return {"attempt": n, "scope": None, "round": None, "error": f"{type(exc).__name__}: {exc}"}
    where = {"where": mode, "scope": scope, "attempt": n}
    if found is None:
        return {**where, "round": None}
    return {**where, "round": found.round_id, "namespace": found.namespace, "failed": found.failed}


def restart_store(env: Mapping[str, str] | None = None, timeout_s: float = 300.0) -> Any:
    """The process-group store a restarted rank must use, or None in the first attempt.

    torchrun (torch 2.13) keeps its store across ``--max-restarts`` attempts, with the keys
    where attempt 0's ranks published their gloo addresses: a restarted rank that joins the
    default way reads them and dials dead ranks (static path: ``Connection refused``;
    standalone: it waits until the deadline). A prefix per attempt keeps each attempt's
    keys apart.
    """
    env = os.environ if env is None else env
    n = restart_count(env)
    if n == 0:
        return None
    from datetime import timedelta

    import torch.distributed as dist

    base = dist.TCPStore(
        env["MASTER_ADDR"],
        int(env["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )
    return dist.PrefixStore(f"zephon-chaos/restart{n}", base)


def restored_from(out_dir: str | Path, world_size: int) -> set[str | None]:
    """The checkpoint each rank of an attempt restored (its ``start`` record), as a set."""
    import json

    from zephon_chaos.workload.records import record_path

    found: set[str | None] = set()
    for rank in range(world_size):
        path = record_path(out_dir, rank)
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("kind") == "start":
                found.add(event.get("restored"))
    return found
