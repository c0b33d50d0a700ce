"""Standalone (torch and zephon only): a checkpoint whose lane keys became strings cannot be
restored while one lane's next chunk id is 0.

Run: ``python string_key_zero_cid.py``. ``Engine.load_state_dict`` (zephon 0.2.0,
``_internal/engine.py``) reads each owned lane's next chunk id as
``ckpt.lane_next_cid.get(str(lane)) or ckpt.lane_next_cid.get(int(lane))``: a stored ``0``
under the string key is falsy, the ``or`` falls through to the int key, which is absent, and
restoring raises ``Lane N does not have next cid in the checkpoint``. A lane's next chunk id
is 0 until it draws its first chunk; here the checkpoints are taken right after ``iter()``.

Two ways the keys become strings, each beside its control (same pipeline, same position):

- ``aggregate_serializer="json"`` (one of Zephon's own options): two ranks, as threads of
  this process, aggregate through one ``aggregate_dir``; ``AggregationCodec._deserialize``
  (``_internal/checkpoint/_codec.py``) is a bare ``json.loads``, so the merged checkpoint
  the ranks get back has string keys. Control: ``"msgpack"``.
- a recipe persisting the checkpoint with ``json.dumps``/``json.loads`` (one rank).
  Controls: ``pickle``; and plain JSON again after one batch on every lane (all next chunk
  ids >= 1), which restores: string keys as such are accepted.

Prints one JSON line per case: ``{"case", "keys", "restore"}``; ``keys`` holds the types of
``lane_next_cid``'s keys as restored, ``restore`` maps each rank to ``"ok"`` (restored and
drew a batch) or its error.
"""

from __future__ import annotations

import json
import pickle
import tempfile
import threading
import warnings
from collections.abc import Callable
from typing import Any

from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

CANONICAL_REPLICAS = 4
JOIN_S = 120.0
"""A rank thread's bound; an aggregation round waits at most ``aggregate_timeout_s`` (30)."""


def build(world: int, rank: int, run_id: str, options: dict[str, Any]) -> Any:
    rows = {s: InMemoryShard([{"s": s, "i": i} for i in range(40)]) for s in range(3)}
    source = StaticMixtureWorkSource(
        datasets=[Dataset.from_dict("a", rows)],
        mixture=MixtureSpec({"a": 1.0}),
        chunk_size=16,
        seed=7,
        shuffle_within_shard=True,
    )
    return (
        Pipeline(source)
        .batch(microbatch_size=4)
        .options(
            world_size=world,
            global_rank=rank,
            canonical_replicas=CANONICAL_REPLICAS,
            run_id=run_id,
            aggregate_timeout_s=30,
            **options,
        )
    )


def on_ranks(world: int, fn: Callable[[int], Any]) -> dict[int, Any]:
    """``fn(rank)`` on ``world`` threads at once; an exception becomes its text."""
    out: dict[int, Any] = {}

    def body(rank: int) -> None:
        try:
            out[rank] = fn(rank)
        except Exception as exc:  # the case's outcome is what this script reports
            out[rank] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    return {r: out.get(r, f"no answer within {JOIN_S:.0f} s") for r in range(world)}


def take_and_restore(
    world: int,
    options: dict[str, Any],
    persist: Callable[[dict[str, Any]], dict[str, Any]],
    batches: int = 0,
) -> tuple[list[str], dict[int, str]]:
    """Checkpoint after ``batches`` batches a rank, pass it through ``persist``, restore, draw
    a batch."""

    def take(rank: int) -> dict[str, Any]:
        pipe = build(world, rank, "first", options)
        it = iter(pipe)
        for _ in range(batches):
            next(it)
        ckpt = pipe.checkpoint()  # collective when world > 1
        it.close()
        return persist(ckpt)

    ckpts = on_ranks(world, take)
    if not all(isinstance(c, dict) for c in ckpts.values()):
        return [], {r: f"checkpoint failed: {c}" for r, c in ckpts.items()}

    def resume(rank: int) -> str:
        pipe = build(world, rank, "second", options)
        pipe.restore(ckpts[rank])
        it = iter(pipe)
        next(it)
        it.close()
        return "ok"

    keys = sorted({type(k).__name__ for c in ckpts.values() for k in c["lane_next_cid"]})
    return keys, on_ranks(world, resume)


def main() -> None:
    warnings.simplefilter("ignore")  # mid-window notes are not what this shows

    def unchanged(ckpt: dict[str, Any]) -> dict[str, Any]:
        return ckpt

    def plain_json(ckpt: dict[str, Any]) -> dict[str, Any]:
        return dict(json.loads(json.dumps(ckpt)))

    def pickled(ckpt: dict[str, Any]) -> dict[str, Any]:
        return dict(pickle.loads(pickle.dumps(ckpt)))

    for serializer in ("msgpack", "json"):
        with tempfile.TemporaryDirectory() as agg:
            options = {"aggregate_dir": agg, "aggregate_serializer": serializer}
            keys, restore = take_and_restore(2, options, unchanged)
        print(
            json.dumps({"case": f"serializer-{serializer}", "keys": keys, "restore": restore})
            + "\n",
            end="",
            flush=True,
        )
    for name, persist in (("pickle", pickled), ("plain-json", plain_json)):
        keys, restore = take_and_restore(1, {}, persist)
        print(
            json.dumps({"case": f"persist-{name}", "keys": keys, "restore": restore}) + "\n",
            end="",
            flush=True,
        )
    # Control: string keys are accepted once every lane has drawn a chunk (one batch each).
    keys, restore = take_and_restore(1, {}, plain_json, batches=CANONICAL_REPLICAS)
    print(
        json.dumps({"case": "persist-plain-json-after-a-step", "keys": keys, "restore": restore})
        + "\n",
        end="",
        flush=True,
    )


if __name__ == "__main__":
    main()
