"""Deliberate loader defects, planted in what a resumed rank records.

They prove the oracle fails when it should: each mimics a real class of resume bug. A plant
acts only on a rank that restored from a checkpoint, and only on rank 0 unless it says so;
under a DP x TP layout "rank" is the rank's DP group (``Plant(name, dp_group, ...)``): a
loader bug acts on what a rank reads, so on every rank of the group that reads it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zephon_chaos.workload.records import Batch

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
    "swap_draw_order": (
        "rank 0 draws its first two batches after resume in swapped order, one step: each "
        "lane's stream unchanged"
    ),
    "draw_lane_by_lane": (
        "rank 0 draws its first two steps after resume lane by lane instead of in turns: each "
        "lane's stream unchanged, its trainer steps not"
    ),
}
REORDERS = {"swap_draw_order", "draw_lane_by_lane"}
"""Plants that change only the order of a rank's draws: they hold batches back."""


class Plant:
    """Rewrites (lane, ids) of batches as the planted defect would have delivered them. A
    reordering plant moves the contents between the slots of the draws it holds back, so
    each record keeps its draw's index, timing and checkpoint count."""

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
        self.held: list[Batch] = []
        reorders = name in REORDERS and rank == 0 and len(lanes) >= 2
        self.hold = 0 if not reorders else 2 if name == "swap_draw_order" else 2 * len(lanes)
        """How many draws a reordering plant holds back (0: it holds none)."""

    def apply(self, batch: Batch) -> list[Batch]:
        """The batches to record now, in order (none while a reordering plant holds)."""
        name, first, lane, ids = self.name, self.seen == 0, batch.lane, batch.ids
        self.seen += 1
        if name is None:
            return [batch]
        if name == "off_by_one_step":
            return [] if self.seen <= len(self.lanes) else [batch]
        if self.rank != 0:
            return [batch]
        if name in ("skip_sample", "skip_after_midwindow_resize") and first:
            return [replace(batch, ids=ids[1:])]
        if name == "duplicate_sample" and first:
            return [replace(batch, ids=[*ids, ids[0]])]
        if name == "swap_lanes" and len(self.lanes) >= 2:
            a, b = self.lanes[0], self.lanes[1]
            return [replace(batch, lane={a: b, b: a}.get(lane, lane))]
        if name == "drop_lane" and lane == self.lanes[0]:
            return []
        if self.seen <= self.hold:
            self.held.append(batch)
            return self._reordered() if self.seen == self.hold else []
        return [batch]

    def release(self) -> list[Batch]:
        """What is still held at the end of the loop, as drawn: the plant never acted."""
        held, self.held = self.held, []
        return held

    def _reordered(self) -> list[Batch]:
        held, self.held = self.held, []
        if self.name == "swap_draw_order":
            contents = [held[1], held[0]]
        else:  # draw_lane_by_lane: each lane's draws together, each in its own order
            contents = sorted(held, key=lambda b: b.lane)  # a rank's lanes are in lane order
        pairs = zip(held, contents, strict=True)
        return [replace(slot, lane=c.lane, ids=c.ids) for slot, c in pairs]
