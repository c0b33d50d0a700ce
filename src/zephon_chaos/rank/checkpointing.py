"""One collective checkpoint of a rank under its retry policy, and its records."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zephon_chaos.rank.hooks import RankHooks
from zephon_chaos.workload import persist
from zephon_chaos.workload.records import CHECKPOINT_BEGUN, RecordWriter
from zephon_chaos.workload.spec import AGREEING_RETRIES, COLLECTIVE_FORMATS, WorkloadSpec


def take_checkpoint(
    pipe: Any,
    spec: WorkloadSpec,
    rank: int,
    index: int,
    after: int,
    lane_counts: dict[int, int],
    out: RecordWriter,
    hooks: RankHooks,
    call_ended: Callable[[int, int], None] = lambda index, attempt: None,
) -> None:
    """One collective checkpoint; under ``spec.retry``, as many attempts as it allows.

    ``call_ended(index, attempt)`` runs each time a ``pipe.checkpoint()`` call has returned
    or raised, before anything else (a link fault that ends with its round is undone there).

    Each attempt of a retrying rank is recorded (kind ``checkpoint_attempt``, with the
    agreement under lockstep and skip); the one ``checkpoint`` record is the final outcome.
    Rank 0 persists only a checkpoint that is final (agreed, under lockstep and skip). Under
    skip a checkpoint not every rank got is recorded as failed (``skipped``) and the rank
    trains on: every rank makes the same calls, one checkpoint and one agreement each.
    """
    started = time.monotonic()
    # Flushed before the call: a rank killed inside checkpoint() (its group torn down after
    # a peer failed) still shows it called, so no oracle takes it for a rank that never came.
    out.write(CHECKPOINT_BEGUN, index=index, started_at=started)
    out.flush()
    attempts = 1 if spec.retry in ("none", "skip") else max(1, spec.retry_attempts)
    agreeing = spec.retry in AGREEING_RETRIES
    error: str = ""
    ckpt: dict[str, Any] | None = None
    warned: list[Any] = []
    attempt = 0
    ended = started  # when the last pipe.checkpoint() call returned or raised
    for attempt in range(1, attempts + 1):
        began = time.monotonic()
        with hooks.capture_warnings() as caught:
            warned = caught
            try:
                ckpt, error = pipe.checkpoint(), ""
            except Exception as exc:
                ended = time.monotonic()
                ckpt, error = None, f"{type(exc).__name__}: {exc}"
                call_ended(index, attempt)
                if attempt == 1:
                    hooks.call_ended(index)
                if spec.retry == "none":
                    write_checkpoint(
                        out, index, after, lane_counts, started, error=error, ended_at=ended
                    )
                    raise
            else:
                ended = time.monotonic()
                call_ended(index, attempt)
                if attempt == 1:
                    hooks.call_ended(index)
        if spec.retry == "none":
            break
        out.write(
            "checkpoint_attempt",
            index=index,
            attempt=attempt,
            ok=ckpt is not None,
            retry=spec.retry,
            error=error or None,
            digest=persist.digest(ckpt) if ckpt is not None else None,
            started_at=began,
            ended_at=ended,
        )
        out.flush()
        agreed = ckpt is not None
        if agreeing:
            try:
                agreed = hooks.agree(agreed)
            except Exception as exc:  # a peer died: the agreement itself failed
                error = f"{type(exc).__name__}: lockstep agreement failed: {exc}"
                write_checkpoint(
                    out, index, after, lane_counts, started, error=error, ended_at=ended
                )
                raise
            out.write("checkpoint_agreement", index=index, attempt=attempt, all_ok=agreed)
            out.flush()
        if agreed:
            break
        if ckpt is not None:
            error = (
                f"RuntimeError: checkpoint {index} succeeded here but failed on another rank "
                f"({spec.retry} agreement, attempt {attempt} of {attempts})"
            )
            ckpt = None
    else:
        if spec.retry == "skip" or spec.draws_past_failures:
            # Recorded, not persisted; the next scheduled one follows (under skip every rank
            # agreed so; a free-running rank gives up alone: ``draws_past_failures``).
            write_checkpoint(
                out, index, after, lane_counts, started, error=error, ended_at=ended, skipped=True
            )
            return
        write_checkpoint(
            out, index, after, lane_counts, started, error=error, attempts=attempts, ended_at=ended
        )
        raise RuntimeError(f"checkpoint {index} failed after {attempts} attempt(s): {error}")
    assert ckpt is not None
    if rank == 0 or spec.persist_format in COLLECTIVE_FORMATS:  # DCP: every rank, together
        persist.save(ckpt, spec.checkpoint_path(index), spec.persist_format)
    elif spec.keeps_own_copy:  # what this rank got, to be judged by resuming it
        persist.save(ckpt, spec.rank_checkpoint_path(index, rank), spec.persist_format)
    write_checkpoint(
        out,
        index,
        after,
        lane_counts,
        started,
        ckpt=ckpt,
        caught=warned,
        attempts=attempt,
        ended_at=ended,
    )


def write_checkpoint(
    out: RecordWriter,
    index: int,
    after: int,
    lane_counts: dict[int, int],
    started: float,
    *,
    ckpt: dict[str, Any] | None = None,
    error: str = "",
    caught: list[Any] | None = None,
    attempts: int = 1,
    ended_at: float | None = None,
    skipped: bool = False,
) -> None:
    fields: dict[str, Any] = {
        "index": index,
        "after_batches": after,
        "ok": ckpt is not None,
        "lane_counts": lane_counts,
        "duration_s": time.monotonic() - started,
        "started_at": started,
        "ended_at": ended_at,
        "attempts": attempts,
    }
    if ckpt is None:
        fields["error"] = error
        if skipped:
            fields["skipped"] = True
    else:
        fields["digest"] = persist.digest(ckpt)
        fields["lanes_covered"] = sorted(int(k) for k in (ckpt.get("progress") or {}))
        fields["warnings"] = [str(w.message) for w in caught or []]
    out.write("checkpoint", **fields)
    out.flush()


