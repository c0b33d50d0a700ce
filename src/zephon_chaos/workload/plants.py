"""Deliberate loader defects, planted in what a resumed rank records.

They prove the oracle fails when it should: each mimics a real class of resume bug. A plant
acts only on a rank that restored from a checkpoint, and only on rank 0 unless it says so;
under a DP x TP layout "rank" is the rank's DP group (``Plant(name, dp_group, ...)``): a
loader bug acts on what a rank reads, so on every rank of the group that reads it.
"""

from __future__ import annotations

from typing import Any

from zephon_chaos.workload.records import SampleId

PLANTS: dict[str, str] = {
    "skip_sample": "the first batch after resume loses its first sample",
    "duplicate_sample": "the first batch after resume repeats its first sample",
    "swap_lanes": "the first two lanes of rank 0 trade their streams after resume",
    "off_by_one_step": "every rank drops its first global step after resume",
    "drop_lane": "rank 0 loses the stream of its first lane after resume",
    "skip_after_midwindow_resize": (
        "the first batch after a resume from a mid-window checkpoint on another world size "
        "loses its first sample"
    ),
}


class Plant:
    """Rewrites (lane, ids) of batches as the planted defect would have delivered them."""

    def __init__(
        self,
        name: str | None,
        rank: int,
        lanes: list[int],
        restored: dict[str, Any] | None,
        world_size: int,
    ) -> None:
        if name is not None and name not in PLANTS:
            raise ValueError(f"unknown plant {name!r}; choose one of {', '.join(PLANTS)}")
        self.name = name if restored is not None else None
        if name == "skip_after_midwindow_resize" and restored is not None:
            counts = list((restored.get("lane_emitted") or {}).values())
            mid = bool(counts) and min(counts) != max(counts)
            resized = int(restored.get("world", {}).get("world_size", world_size)) != world_size
            self.name = name if (mid and resized) else None
        self.rank = rank
        self.lanes = lanes
        self.seen = 0

    def apply(self, lane: int, ids: list[SampleId]) -> tuple[int, list[SampleId]] | None:
        """The batch to record, or None to record nothing."""
        name, first = self.name, self.seen == 0
        self.seen += 1
        if name is None:
            return lane, ids
        if name == "off_by_one_step":
            return None if self.seen <= len(self.lanes) else (lane, ids)
        if self.rank != 0:
            return lane, ids
        if name in ("skip_sample", "skip_after_midwindow_resize") and first:
            return lane, ids[1:]
        if name == "duplicate_sample" and first:
            return lane, [*ids, ids[0]]
        if name == "swap_lanes" and len(self.lanes) >= 2:
            a, b = self.lanes[0], self.lanes[1]
            return ({a: b, b: a}.get(lane, lane)), ids
        if name == "drop_lane" and lane == self.lanes[0]:
            return None
        return lane, ids
