"""``slicer``: chunks cut into ``average_size`` ± ``size_variation`` byte slices."""

from __future__ import annotations

import random
from dataclasses import dataclass

from zephon_chaos.faults.proxy.toxics.attributes import Attributes, GoInt
from zephon_chaos.faults.proxy.toxics.base import Chunk, Emit, Stage
from zephon_chaos.faults.proxy.toxics.registry import register


@dataclass(frozen=True)
class SlicerToxic(Attributes):
    average_size: GoInt = 0  # bytes
    size_variation: GoInt = 0  # bytes, either way
    delay: GoInt = 0  # µs between slices


@register("slicer", SlicerToxic)
class SlicerStage(Stage[SlicerToxic]):
    """Split chunks into ``average_size`` ± ``size_variation`` byte slices, ``delay`` µs apart."""

    def _cuts(self, size: int) -> list[int]:
        average = max(1, self.attributes.average_size)
        variation = max(0, self.attributes.size_variation)
        cuts: list[int] = []
        pending = [(0, size)]
        while pending:
            start, end = pending.pop()
            if (end - start) - average <= variation or end - start <= 1:
                cuts.append(end)
                continue
            shift = random.randrange(variation * 2) - variation if variation else 0
            mid = min(end - 1, max(start + 1, start + (end - start) // 2 + shift))
            pending.append((mid, end))
            pending.append((start, mid))
        return cuts

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        delay = self.attributes.delay / 1_000_000.0
        start = 0
        for end in self._cuts(len(chunk.data)):
            await emit(Chunk(chunk.data[start:end], chunk.ts))
            start = end
            if start < len(chunk.data) and await self.sleep(delay):
                await emit(Chunk(chunk.data[start:], chunk.ts))
                return
