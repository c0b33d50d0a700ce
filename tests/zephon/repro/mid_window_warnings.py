"""Standalone (torch and zephon only): two ways a mid-window checkpoint does not warn its caller.

Run: ``python mid_window_warnings.py``. Zephon documents that a checkpoint taken mid-window
(lanes that have emitted unequal numbers of batches) warns, because a resume on another world
size then keeps each lane gapless but may permute the step assignment. The warning is raised
by ``Engine._check_mid_window_counts`` (zephon 0.2.0 ``_internal/engine.py`` 1662), which the
engine's ``state_dict`` calls: a lone rank checks its own counts (1860-1868), a group's leader
in the round's merge (``_merge_state_dicts``, 2104). One rank, C=2, one batch drawn: lane
counts 1 and 0.

- ``after-restore`` (known defect ``checkpoint-after-restore-skips-round``): that mid-window
  checkpoint restored into a new pipeline, which checkpoints before its first batch.
  ``Pipeline.checkpoint`` (``_internal/pipeline.py`` 2019-2026) returns ``dict(self.
  _pending_restore)`` before any engine exists: no round runs, nothing warns, and the
  result is the restored checkpoint unchanged (in a group, naming the old world size).
  Controls: ``fresh`` (the first checkpoint itself warns) and ``after-restore-and-batches``
  (the restored pipeline draws two batches first: its round runs and warns).
- ``mtp`` (known defect ``mtp-mid-window-warning-stays-in-child``): the same position with
  ``mtp_mode=True``. The engine runs in the MTP child; on ``_CHECKPOINT`` the child runs
  ``engine.state_dict()`` and sends back only the state (``_internal/mtp.py``
  ``_handle_ctrl_msg``, 393-409): the warning is printed on the child's stderr, attributed to
  ``mtp.py:407``, and the process that
  called ``checkpoint()`` catches none. Control: ``fresh`` (inline, the same position).

Prints one JSON line per case: ``{"case", "lane_emitted", "warned", "unchanged"}``: the lane
counts the checkpoint holds, whether the caller caught "Checkpoint taken mid-window", and
whether the checkpoint equals the one restored (``None`` where nothing was restored).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

C = 2
MID_WINDOW = "Checkpoint taken mid-window"


def build(*, mtp: bool = False) -> Any:
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
        .options(world_size=1, global_rank=0, canonical_replicas=C, mtp_mode=mtp, run_id="w")
    )


def checkpoint(pipe: Any) -> tuple[dict[str, Any], bool]:
    """The checkpoint, and whether its caller caught the mid-window warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ckpt = pipe.checkpoint()
    return ckpt, any(MID_WINDOW in str(w.message) for w in caught)


def report(case: str, ckpt: dict[str, Any], warned: bool, restored: Any = None) -> None:
    line = {
        "case": case,
        "lane_emitted": {str(k): v for k, v in ckpt["lane_emitted"].items()},
        "warned": warned,
        "unchanged": None if restored is None else ckpt == restored,
    }
    print(json.dumps(line) + "\n", end="", flush=True)


def drawn(pipe: Any, batches: int) -> Any:
    """``pipe``'s iterator after ``batches`` batches."""
    it = iter(pipe)
    for _ in range(batches):
        next(it)
    return it


def main() -> None:
    pipe = build()
    it = drawn(pipe, 1)
    first, warned = checkpoint(pipe)
    it.close()
    report("fresh", first, warned)

    pipe = build()
    pipe.restore(first)
    ckpt, warned = checkpoint(pipe)
    report("after-restore", ckpt, warned, first)

    pipe = build()
    pipe.restore(first)
    it = drawn(pipe, 2)
    ckpt, warned = checkpoint(pipe)
    it.close()
    report("after-restore-and-batches", ckpt, warned, first)

    pipe = build(mtp=True)
    it = drawn(pipe, 1)
    ckpt, warned = checkpoint(pipe)
    it.close()
    report("mtp", ckpt, warned)


if __name__ == "__main__":
    main()
